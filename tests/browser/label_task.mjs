// Log in to Label Studio, open one task, check what an annotator sees, press hotkeys, pick an option,
// keep, submit.
// Usage: node label_task.mjs <url> <email> <password> <projectId> <taskId> <optionText> <screenshot.png> [hotkeys]
// `hotkeys` is one or more keys separated by spaces ("2 r"), pressed in turn. Prints one JSON line: what
// was seen on the labeling page (which labels are radio buttons and which checkboxes; an image set's
// numbered images; the crop a text question was read from), and the radio labels checked at the start,
// after the hotkeys and after the click.
import { chromium } from 'playwright-core';

const [url, email, password, projectId, taskId, optionText, screenshot, hotkeys = '1'] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const page = await browser.newPage({ viewport: { width: 1400, height: 1700 } });
const dialogs = [];  // markup from task data that ran as script would open one
page.on('dialog', async (dialog) => { dialogs.push(dialog.message()); await dialog.dismiss(); });
// the radio options checked on the labeling page (the data manager's view switch is a radio, without text)
const labelled = async (input) => (await page.locator(`label:visible:has(${input})`).allInnerTexts())
  .filter((text) => text.trim());
const checked = () => labelled('input[type="radio"]:checked');
try {
  page.setDefaultTimeout(60000);
  await page.goto(`${url}/user/login/`);
  await page.fill('input[name="email"]', email);
  await page.fill('input[name="password"]', password);
  await Promise.all([page.waitForURL((u) => !u.pathname.startsWith('/user/login')), page.click('button[type="submit"]')]);

  await page.goto(`${url}/projects/${projectId}/data?task=${taskId}`);
  const option = page.locator('label').filter({ has: page.getByText(optionText, { exact: true }) });
  await option.waitFor();
  // Label Studio fetches the task's image and shows it from a blob: URL; wait until one has pixels.
  const imageSize = await (await page.waitForFunction(() => {
    const shown = [...document.querySelectorAll('img')].filter((e) => e.complete && e.naturalWidth > 0);
    return shown.length ? [shown[0].naturalWidth, shown[0].naturalHeight] : null;
  })).jsonValue();
  // an image set's images, in page order: each one's caption, size and place, once every one has pixels
  const figures = await (await page.waitForFunction(() => {
    const shown = [...document.querySelectorAll('figure')].map((f) => {
      const img = f.querySelector('img'), box = img.getBoundingClientRect();
      return { caption: f.querySelector('figcaption').innerText, size: [img.naturalWidth, img.naturalHeight],
               at: [Math.round(box.x), Math.round(box.y)] };
    });
    return shown.every((f) => f.size[0] > 0) && shown;
  })).jsonValue();
  // where the text of a text question was read, as shown: each crop's frame size, and a picture of it
  const crops = [];
  for (const frame of await page.locator('[data-crop]').all()) {
    const box = await frame.boundingBox();
    const file = screenshot.replace(/\.png$/, `-crop${crops.length}.png`);
    await frame.screenshot({ path: file });
    crops.push({ size: [Math.round(box.width), Math.round(box.height)], file });
  }
  const seen = {
    figures,
    crops,
    question: await page.locator('h1, h2, h3, h4').allInnerTexts(),
    labels: await page.locator('label:visible').allInnerTexts(),
    text: await page.locator('body').innerText(),
    imageSize,
    radios: await labelled('input[type="radio"]'),
    checkboxes: await labelled('input[type="checkbox"]'),
    checkedAtStart: await checked(),
  };
  const reasons = page.getByText('Why discard it?');
  // Label Studio binds its hotkeys a moment after the task shows, and re-renders a choice after its key:
  // press each key once the page is idle, and read the radios once they have changed (or after 5 s).
  await page.waitForLoadState('networkidle', { timeout: 10000 }).catch(() => {});
  for (const key of hotkeys.split(' ')) {
    const before = JSON.stringify(await checked());
    await page.keyboard.press(key);
    for (const until = Date.now() + 5000; Date.now() < until && JSON.stringify(await checked()) === before;) {
      await page.waitForTimeout(100);
    }
  }
  seen.checkedByHotkey = await checked();
  await option.click();
  seen.checkedByClick = await checked();
  await page.locator('label').filter({ hasText: /^Discard/ }).click();
  seen.reasonsShownOnDiscard = await reasons.isVisible();
  seen.reasonsOnDiscard = await labelled('input[type="checkbox"]');
  await page.locator('label').filter({ hasText: /^Keep/ }).click();
  seen.reasonsShownOnKeep = await reasons.isVisible();
  await page.screenshot({ path: screenshot, fullPage: true });
  await page.locator('button').filter({ hasText: /^Submit/ }).click();
  await page.waitForResponse((r) => r.url().includes('/annotations') && r.request().method() === 'POST');
  seen.dialogs = dialogs;
  console.log(JSON.stringify(seen));
} catch (error) {
  await page.screenshot({ path: screenshot.replace(/\.png$/, '-failed.png'), fullPage: true });
  console.error(`failed at ${page.url()}: ${error.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
