// Runs CenterNet-MobileNetV3 (COCO-80, from @vladmandic/human) for extractors/detector.py.
// Protocol on stdin/stdout: after a first line {"ready": true, "size": S}, each request is S*S*3 bytes of RGB
// (the image already resized to SxS by the caller); each answer is one JSON line {"detections": [[x1, y1,
// x2, y2, score, class], ...]} in input pixels, class 0-based over COCO's 80 labels. Errors go to stderr.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const tf = require('@tensorflow/tfjs-core');
const { loadGraphModel } = require('@tensorflow/tfjs-converter');
const wasm = require('@tensorflow/tfjs-backend-wasm');

const modelJson = process.argv[2] || fileURLToPath(new URL('./node_modules/@vladmandic/human/models/centernet.json', import.meta.url));
const threads = Number(process.env.CENTERNET_THREADS || 1);

// Node's fetch cannot read file:// URLs: the wasm binaries and the weights are read from disk here.
wasm.setWasmPaths(dirname(require.resolve('@tensorflow/tfjs-backend-wasm')) + '/');
wasm.setThreadsCount(threads);
await tf.setBackend('wasm');
await tf.ready();

const artifacts = JSON.parse(readFileSync(modelJson, 'utf8'));
const weightSpecs = artifacts.weightsManifest.flatMap((group) => group.weights);
const buffers = artifacts.weightsManifest.flatMap((group) => group.paths.map((p) => readFileSync(join(dirname(modelJson), p))));
const joined = Buffer.concat(buffers);
const weightData = joined.buffer.slice(joined.byteOffset, joined.byteOffset + joined.byteLength);
const model = await loadGraphModel(tf.io.fromMemory({ modelTopology: artifacts.modelTopology, weightSpecs, weightData, signature: artifacts.signature }));
const size = Number(artifacts.signature.inputs['tower_0/images'].tensorShape.dim[1].size);
const frame = size * size * 3;

process.stdout.write(JSON.stringify({ ready: true, size, backend: tf.getBackend() }) + '\n');

let pending = Buffer.alloc(0);
let busy = Promise.resolve();
process.stdin.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  while (pending.length >= frame) {
    const pixels = pending.subarray(0, frame);
    pending = pending.subarray(frame);
    const copy = Float32Array.from(pixels);
    busy = busy.then(() => detect(copy));
  }
});
process.stdin.on('end', () => busy.then(() => process.exit(0)));

async function detect(pixels) {
  const input = tf.tensor4d(pixels, [1, size, size, 3], 'float32');
  const output = model.execute(input, 'tower_0/detections');
  const detections = (await output.array())[0];
  tf.dispose([input, output]);
  process.stdout.write(JSON.stringify({ detections }) + '\n');
}
