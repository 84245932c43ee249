/**
 * Runs the example against `./dev start`:
 *
 *   ALLOW_PRIVATE_TARGETS=127.0.0.1:8091 ./dev start          # in one terminal
 *   pnpm --filter @requester/example-partner-service start     # in another
 *   curl -s http://127.0.0.1:3000/quotes/apple
 *   curl -s -X POST http://127.0.0.1:3000/orders -H 'content-type: application/json' \
 *     -d '{"id":"42","items":[{"sku":"apple","quantity":3}]}'
 *   curl -s http://127.0.0.1:3000/orders/42/delivery
 *
 * REQUESTER_URL (default http://127.0.0.1:8080), REQUESTER_API_KEY (default the key `./dev start`
 * keeps in .run/local-api-key), PARTNER_URL (default: a fake partner started here on port 8091),
 * PORT (default 3000).
 */
import { readFileSync } from 'node:fs';
import { serve } from '@hono/node-server';
import { RequesterClient } from '@requester/client';
import { createApp } from './app.ts';
import { startFakePartner } from './partner.ts';

const apiKey =
  process.env.REQUESTER_API_KEY ??
  readFileSync(new URL('../../../.run/local-api-key', import.meta.url), 'utf8').trim();
const requester = new RequesterClient({ url: process.env.REQUESTER_URL ?? 'http://127.0.0.1:8080', apiKey });
const partnerUrl = process.env.PARTNER_URL ?? (await startFakePartner(8091)).url;
const port = Number(process.env.PORT ?? 3000);
// Said once the port is open: whoever waits for the line (a script, a test) may call at once.
serve({ fetch: createApp({ requester, partnerUrl }).fetch, port, hostname: '127.0.0.1' }, () =>
  console.log(`partner-service on http://127.0.0.1:${port}, calling ${partnerUrl} through Requester`),
);
