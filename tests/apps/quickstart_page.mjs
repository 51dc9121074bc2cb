// The quick start's last step in headless Chromium (driven by playwright-core, as
// tests/server/js/ui_browser_test.mjs): open the page, enter the API key, wait until the page
// lists MODEL, save a screenshot.
//   node quickstart_page.mjs URL API_KEY MODEL SCREENSHOT_PNG
// Run from the server tests' js folder (where npm ci put playwright-core).
import { chromium } from 'playwright-core';

const [url, key, model, shot] = process.argv.slice(2);
// Chromium's sandbox cannot start as root (the CI container runs tests as root).
const args = process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [];
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args });
try {
  const page = await browser.newPage({ viewport: { width: 1000, height: 800 } });
  await page.goto(url);
  await page.fill('#api-key', key);
  await page.click('#key-save');
  // The model appears once /v1/models answered with the key: as an option of a model list, or
  // named in the page's text (a model the page does not offer for chat is named with why).
  await page.waitForFunction((name) => [...document.querySelectorAll('option')].some((o) => o.value === name) ||
    document.body.innerText.includes(name), model, { timeout: 15000 });
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`page lists ${model}; screenshot: ${shot}`);
} finally {
  await browser.close();
}
