// Log in to Label Studio, open one conversation task, read what the text areas start with, replace the
// reference answer of turn 2, keep, submit.
// Usage: node review_conversation.mjs <url> <email> <password> <projectId> <taskId> <newReference> <screenshot.png>
// Prints one JSON line: the text areas' starting values, by name.
import { chromium } from 'playwright-core';

const [url, email, password, projectId, taskId, newReference, screenshot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const page = await browser.newPage({ viewport: { width: 1400, height: 2400 } });
try {
  page.setDefaultTimeout(60000);
  await page.goto(`${url}/user/login/`);
  await page.fill('input[name="email"]', email);
  await page.fill('input[name="password"]', password);
  await Promise.all([page.waitForURL((u) => !u.pathname.startsWith('/user/login')), page.click('button[type="submit"]')]);

  await page.goto(`${url}/projects/${projectId}/data?task=${taskId}`);
  await page.getByText('Turn 3 (creation)').waitFor();
  const areas = page.locator('textarea');
  await areas.first().waitFor();
  const seen = { headers: await page.locator('h1, h2, h3, h4, h5, h6').allInnerTexts(), areas: [] };
  for (const area of await areas.all()) {
    seen.areas.push({ name: await area.getAttribute('name'), value: await area.inputValue(),
                      visible: await area.isVisible() });
  }
  const reference = page.locator('textarea[name="reference_2"]');
  await reference.fill(newReference);
  await page.locator('label').filter({ hasText: /^Keep/ }).click();
  await page.screenshot({ path: screenshot, fullPage: true });
  await page.locator('button').filter({ hasText: /^Submit/ }).click();
  await page.waitForResponse((r) => r.url().includes('/annotations') && r.request().method() === 'POST');
  console.log(JSON.stringify(seen));
} catch (error) {
  await page.screenshot({ path: screenshot.replace(/\.png$/, '-failed.png'), fullPage: true });
  console.error(`failed at ${page.url()}: ${error.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
