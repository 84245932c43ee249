import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';

/**
 * The operator UI's tests drive Debian's Chromium headless (`infra/chromium.sh` installs it;
 * `./dev test` runs that). A missing browser fails the test that needs it: a UI test that skips
 * itself on a machine without one would pass without having looked at a page.
 */
export const CHROMIUM = '/usr/bin/chromium';

/** `UI_SCREENSHOTS=<dir>`: where the UI tests save their pages (docs/ui holds the README's). */
export const SCREENSHOTS = process.env.UI_SCREENSHOTS;

export interface TestBrowser {
  context: BrowserContext;
  /** Closes the browser and removes its profile. */
  close(): Promise<void>;
}

/** A headless Chromium with a profile of its own (`name` prefixes its temporary directory). */
export async function openBrowser(
  name: string,
  viewport: { width: number; height: number } = { width: 1280, height: 800 },
): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: run \`bash infra/chromium.sh\` (./dev test does)`);
  if (SCREENSHOTS) await mkdir(SCREENSHOTS, { recursive: true });
  const userDataDir = await mkdtemp(path.join(tmpdir(), `requester-${name}-`));
  try {
    const context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      viewport,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--no-first-run',
        '--disable-background-networking',
      ],
    });
    return {
      context,
      close: async () => {
        await context.close();
        await rm(userDataDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await rm(userDataDir, { recursive: true, force: true });
    throw err;
  }
}

/** Logs `page` in to the operator UI with an admin key's token (ending a session it already has). */
export async function logIn(page: Page, adminUrl: string, token: string): Promise<void> {
  await page.goto(`${adminUrl}/ui/overview`);
  if ((await page.locator('#logout').count()) > 0)
    await Promise.all([page.waitForURL('**/ui/login'), page.click('#logout')]);
  await page.fill('input[name=token]', token);
  await Promise.all([page.waitForURL('**/ui/overview'), page.click('button[type=submit]')]);
}
