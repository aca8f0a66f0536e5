"""An lmms-eval model plugin (LMMS_EVAL_PLUGINS=scripted_lmms) that gives scripted replies, so a test can
run a release's task through the real lmms-eval and know the accuracy it must report."""
