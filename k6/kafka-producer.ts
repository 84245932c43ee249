// Direct Kafka producers: envelopes written straight to `in` (no HTTP hop), keyed as the contract
// says (meta.partition, else meta.requestId). Needs a k6 built with xk6-kafka:
//   xk6 build --with github.com/mostafa/xk6-kafka
//   ./k6 run -e BROKERS=127.0.0.1:9092 -e TOPIC=requester.in k6/kafka-producer.ts
import exec from 'k6/execution';
import type { Options } from 'k6/options';
import { SCHEMA_TYPE_STRING, SchemaRegistry, Writer } from 'k6/x/kafka';
import { type Envelope, TARGET } from './lib.ts';

const BATCH = Number(__ENV.BATCH || 100);
const writer = new Writer({
  brokers: (__ENV.BROKERS || '127.0.0.1:9092').split(','),
  topic: __ENV.TOPIC || 'requester.in',
});
const registry = new SchemaRegistry();
const RUN = Date.now().toString(36);

export const options: Options = {
  scenarios: {
    produce: { executor: 'constant-vus', vus: Number(__ENV.VUS || 4), duration: __ENV.DURATION || '30s' },
  },
};

const bytes = (data: string) => registry.serialize({ data, schemaType: SCHEMA_TYPE_STRING });

export default function (): void {
  const messages = [];
  for (let i = 0; i < BATCH; i++) {
    const requestId = `k6-kafka-${RUN}-${exec.vu.idInTest}-${exec.scenario.iterationInTest}-${i}`;
    const envelope: Envelope = {
      request: { uri: `${TARGET}/echo`, body: 'x'.repeat(100) },
      meta: { requestId },
    };
    messages.push({ key: bytes(requestId), value: bytes(JSON.stringify(envelope)) });
  }
  writer.produce({ messages });
}

export function teardown(): void {
  writer.close();
}
