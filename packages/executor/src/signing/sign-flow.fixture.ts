import { loadConfig } from '@requester/shared/config';
import type { RequestEnvelope } from '@requester/shared/contract';
import { createLogger } from '@requester/shared/log';
import { toHttpCall } from '../http/request.ts';
import { parseSigningKeys, signingKeysFromConfig, signRequest } from './index.ts';

/**
 * A full sign flow as an executor would run it, logging everything a careless worker might log,
 * at the most verbose level. Run as a child process by index.unit.test.ts, which reads its stdout and
 * stderr (the real pino output) and looks for the secrets of SIGNING_KEYS.
 */
const config = loadConfig(process.env);
const logger = createLogger({ level: 'trace' }).child({ role: 'executor' });
logger.info({ config }, 'configuration');
const keys = signingKeysFromConfig(config) ?? parseSigningKeys('');
logger.debug({ keys, ids: keys.ids }, 'signing keys loaded');

const envelope: RequestEnvelope = {
  request: { uri: 'https://partner.example/hook', method: 'POST', body: '{"order":42}', headers: {} },
  meta: { requestId: 'ord-42', signing: { keyId: 'partner' } },
} as RequestEnvelope;
for (const keyId of keys.ids) {
  const call = signRequest(toHttpCall(envelope), { keyId, requestId: envelope.meta.requestId }, keys);
  logger.trace({ call, envelope, keyId, signingKeys: keys }, 'signed call');
}
try {
  signRequest(toHttpCall(envelope), { keyId: 'missing', requestId: 'ord-42' }, keys);
} catch (err) {
  logger.error({ err }, 'signing failed');
}
try {
  parseSigningKeys(`${config.signingKeys.reveal()};broken=whsec_***`);
} catch (err) {
  logger.error({ err, config }, 'bad SIGNING_KEYS');
}
console.log(JSON.stringify({ config, keys }));
console.error(String(config.signingKeys), keys);
