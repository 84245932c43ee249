import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { CredentialStore, createPg, parseMasterKeys } from '@requester/shared';
import { eventually } from '@requester/shared/testing';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { logIn, openBrowser, SCREENSHOTS, type TestBrowser } from './browser.fixture.ts';
import {
  dropStackDatabase,
  type StackEnv,
  stackEnv,
  stackKey,
  startStack,
  waitReady,
} from './stack.fixture.ts';

/**
 * The Credentials page of the operator UI in a real Chromium against a running stack: a write key
 * creates a signing key, rotates it (the old secret kept signing) and revokes it from the page; the
 * secrets are posted once (password inputs, emptied after the post), never in any page, answer or
 * log, and sealed in PostgreSQL; each action is recorded (admin_actions_total). A read-only key sees
 * the list but no form and no button, and its forged POST is refused (403). With
 * UI_SCREENSHOTS=<dir>, the page is saved there (docs/ui/credentials.png).
 */
const MASTER_KEY = `ui:${randomBytes(32).toString('base64')}`;
const FIRST = `whsec_${randomBytes(24).toString('base64')}`;
const SECOND = `whsec_${randomBytes(24).toString('base64')}`;

describe('operator UI: credentials', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let writer: Awaited<ReturnType<typeof stackKey>>;
  let reader: Awaited<ReturnType<typeof stackKey>>;
  let context: BrowserContext;
  let browser: TestBrowser | undefined;
  const seen: string[] = [];

  beforeAll(async () => {
    stack = await stackEnv({ CREDENTIALS_MASTER_KEY: MASTER_KEY, CREDENTIALS_CACHE_TTL: '100ms' });
    running = await startStack(stack);
    await waitReady(stack);
    [writer, reader] = await Promise.all([
      stackKey(stack, { admin: 'write' }),
      stackKey(stack, { admin: 'read' }),
    ]);
    browser = await openBrowser('ui-credentials', { width: 1280, height: 900 });
    context = browser.context;
    // Every answer the browser got from the admin port, to look for the secrets in.
    context.on('response', async (response) => {
      if (response.url().startsWith(stack.adminUrl)) seen.push(await response.text().catch(() => ''));
    });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await running?.shutdown('test over');
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  const login = (page: Page, token: string) => logIn(page, stack.adminUrl, token);
  const row = (page: Page, name: string) => page.locator(`tr[data-credential="${name}"]`);
  const flash = (page: Page, text: string) =>
    eventually(
      async () => ((await page.textContent('#flash')) ?? '').includes(text),
      30_000,
      `the flash says ${text}`,
    );

  it('a write key creates, rotates and revokes a signing key; secrets go once and never come back', async () => {
    const page = await context.newPage();
    await login(page, writer.token);
    await page.goto(`${stack.adminUrl}/ui/credentials`);
    await page.waitForSelector('#credentials p, #credentials table');

    await page.fill('input[name=name]', 'ui-hooks');
    await page.fill('input[name=origins]', 'https://hooks.customer.example');
    await page.selectOption('select[name=kind]', 'signing');
    await page.fill('input[name=signing]', FIRST);
    expect(await page.getAttribute('input[name=signing]', 'type')).toBe('password');
    await page.click('button[data-action=create]');
    await flash(page, 'Created ui-hooks (signing), version 1.');
    await row(page, 'ui-hooks').waitFor();
    expect(await row(page, 'ui-hooks').locator('td').allTextContents()).toEqual(
      expect.arrayContaining(['ui-hooks', 'signing', '1', 'https://hooks.customer.example:443']),
    );
    // Posted once: the form is emptied, nothing keeps the secret in the page.
    await eventually(
      async () => (await page.inputValue('input[name=signing]')) === '',
      10_000,
      'the form is emptied',
    );

    // A bad secret is refused by name, never echoed.
    await page.fill('input[name=name]', 'ui-bad');
    await page.fill('input[name=signing]', 'hex:0011');
    await page.click('button[data-action=create]');
    await flash(page, 'at least 16 are needed');

    // Rotation: the new secret first, the old one still signing.
    await page.fill('input[name=name]', 'ui-hooks');
    await page.fill('input[name=signing]', SECOND);
    await page.fill('input[name=signingPrevious]', FIRST);
    page.once('dialog', (dialog) => void dialog.accept());
    await page.click('button[data-action=rotate]');
    await flash(page, 'Rotated ui-hooks to version 2');
    await eventually(
      async () => (await row(page, 'ui-hooks').locator('td').nth(2).textContent()) === '2',
      30_000,
      'the list shows version 2',
    );
    if (SCREENSHOTS)
      await page.screenshot({ path: path.join(SCREENSHOTS, 'credentials.png'), fullPage: true });

    const sql = createPg({ url: stack.config.databaseUrl, max: 1 });
    try {
      const opened = await new CredentialStore(sql, parseMasterKeys(MASTER_KEY)).open('ui-hooks');
      expect(opened.credential?.secrets.signing).toEqual([SECOND, FIRST]);
    } finally {
      await sql.end({ timeout: 5 });
    }

    page.once('dialog', (dialog) => void dialog.accept());
    await row(page, 'ui-hooks').locator('button[data-action=revoke]').click();
    await flash(page, 'Revoked ui-hooks');
    await eventually(
      async () => (await row(page, 'ui-hooks').locator('button[data-action=revoke]').count()) === 0,
      30_000,
      'the revoked credential has no button',
    );
    expect(await row(page, 'ui-hooks').locator('td').nth(6).textContent()).not.toBe('-');

    const metrics = await (await fetch(`${stack.adminUrl}/metrics`)).text();
    for (const action of ['credentials.create', 'credentials.rotate', 'credentials.revoke'])
      expect(metrics).toContain(`action="${action}",actor="${writer.name}",outcome="done"`);
    const html = await page.content();
    for (const text of [html, ...seen, metrics])
      for (const secret of [FIRST, SECOND, FIRST.slice(6), SECOND.slice(6)])
        expect(text).not.toContain(secret);
    await page.close();
  }, 180_000);

  it('a read-only key sees the list without form or buttons; its forged POST is refused', async () => {
    const page = await context.newPage();
    const created = await fetch(`${stack.adminUrl}/admin/api/credentials/create`, {
      method: 'POST',
      headers: { authorization: `Bearer ${writer.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'ui-live',
        secrets: { signing: SECOND },
        origins: ['https://hooks.customer.example'],
      }),
    });
    expect(created.status).toBe(200);
    await login(page, reader.token);
    await page.goto(`${stack.adminUrl}/ui/credentials`);
    await row(page, 'ui-live').waitFor();
    expect(await page.locator('form[data-action=credential-form]').count()).toBe(0);
    expect(await page.locator('button[data-action]').count()).toBe(0);
    for (const verb of ['create', 'rotate', 'revoke', 'set-origins']) {
      const forged = await fetch(`${stack.adminUrl}/admin/api/credentials/${verb}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${reader.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'ui-live', secrets: { signing: FIRST } }),
      });
      expect(forged.status, verb).toBe(403);
    }
    // Still live, still version 1.
    expect(await row(page, 'ui-live').locator('td').nth(2).textContent()).toBe('1');
    await page.close();
  }, 120_000);
});
