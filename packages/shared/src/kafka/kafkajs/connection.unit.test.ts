import { createRequire } from 'node:module';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';

/**
 * kafkajs's connection framing as patches/kafkajs@2.2.4.patch leaves it, against a loopback server
 * that plays a broker whose connections break mid-response. Unpatched, a connection kept the bytes
 * of a response cut by a reset and framed the next socket's bytes after them (a reconnect's
 * responses never matched, or a size read from the middle of one threw out of the socket's data
 * handler: `ERR_BUFFER_OUT_OF_BOUNDS`, the process gone, kafkajs#715), and a frame too short to
 * hold a correlation id threw the same way.
 */

interface Connection {
  connect(): Promise<boolean>;
  disconnect(): Promise<boolean>;
  send(options: { request: object; response: object; requestTimeout?: number }): Promise<Buffer>;
}

const require = createRequire(import.meta.url);
const KafkaConnection = require('kafkajs/src/network/connection') as new (options: object) => Connection;
const Encoder = require('kafkajs/src/protocol/encoder') as new () => object;
const socketFactory = (require('kafkajs/src/network/socketFactory') as () => unknown)();

const silent = { debug() {}, info() {}, warn() {}, error() {}, namespace: () => silent };

/** A request whose response is its payload as it came (the framing under test, not a protocol). */
const request = { apiKey: 18, apiName: 'ApiVersions', apiVersion: 0, encode: async () => new Encoder() };
const response = { decode: async (payload: Buffer) => payload, parse: async (payload: Buffer) => payload };

/** A frame: its size, then a correlation id and `payload`. */
function frame(correlationId: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeInt32BE(4 + payload.length, 0);
  head.writeInt32BE(correlationId, 4);
  return Buffer.concat([head, payload]);
}

/** The correlation id of a request as the client wrote it: size, api key, version, then the id. */
const correlationOf = (data: Buffer) => data.readInt32BE(8);

type Answer = (socket: net.Socket, correlationId: number) => void;

let server: net.Server | undefined;
afterEach(() => server?.close());

/** A server that answers each accepted connection's first request with the next of `answers`. */
async function broker(answers: Answer[]): Promise<number> {
  server = net.createServer((socket) => {
    const answer = answers.shift();
    socket.once('data', (data) => answer?.(socket, correlationOf(data)));
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
}

function connection(port: number): Connection {
  return new KafkaConnection({
    host: '127.0.0.1',
    port,
    logger: silent,
    socketFactory,
    requestTimeout: 3_000,
    enforceRequestTimeout: true,
    connectionTimeout: 3_000,
  });
}

describe('kafkajs connection framing (patched)', () => {
  it('frames a reconnected socket from its first byte, not after a response the reset cut', async () => {
    const port = await broker([
      // A response's size and its first bytes, then a reset: the rest never comes.
      (socket, id) => {
        socket.write(frame(id, Buffer.alloc(96)).subarray(0, 14));
        setTimeout(() => socket.resetAndDestroy(), 50);
      },
      (socket, id) => socket.write(frame(id, Buffer.from('whole'))),
    ]);
    const conn = connection(port);
    await conn.connect();
    await expect(conn.send({ request, response })).rejects.toThrow();
    await conn.disconnect();
    await conn.connect();
    await expect(conn.send({ request, response })).resolves.toEqual(Buffer.from('whole'));
    await conn.disconnect();
  });

  it('fails the connection, not the process, on a frame too short for a correlation id', async () => {
    const port = await broker([
      (socket) => {
        const short = Buffer.alloc(6);
        short.writeInt32BE(2, 0);
        socket.write(short);
      },
    ]);
    const conn = connection(port);
    await conn.connect();
    await expect(conn.send({ request, response })).rejects.toThrow(/Connection error/);
    await conn.disconnect();
  });
});
