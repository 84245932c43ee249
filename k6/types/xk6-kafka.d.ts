// The part of xk6-kafka (https://github.com/mostafa/xk6-kafka) that kafka-producer.ts uses.
// xk6-kafka ships no npm types; these follow its documented API (Writer, SchemaRegistry).
declare module 'k6/x/kafka' {
  export const SCHEMA_TYPE_STRING: string;
  export interface Message {
    key?: Uint8Array;
    value: Uint8Array;
    headers?: Record<string, string>;
  }
  export class Writer {
    constructor(config: { brokers: string[]; topic: string; autoCreateTopic?: boolean });
    produce(options: { messages: Message[] }): void;
    close(): void;
  }
  export class SchemaRegistry {
    serialize(options: { data: string; schemaType: string }): Uint8Array;
  }
}
