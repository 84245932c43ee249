import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * How long, and how many bytes, a refused request may still send while its answer goes out. Past
 * either, the connection is dropped: a client that keeps streaming headers costs no more.
 */
const DRAIN_MS = 5_000;
const DRAIN_BYTES = 1 << 20;

/** The answer to each error of Node's HTTP parser (what Node itself answers, without a body). */
function statusOf(code: string | undefined): [number, string] {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return [431, 'Request Header Fields Too Large'];
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return [413, 'Payload Too Large'];
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return [408, 'Request Timeout'];
    default:
      return [400, 'Bad Request'];
  }
}

/**
 * Answers a request Node's parser refuses (headers past its 16 KiB, a malformed request line…)
 * and closes the connection so that the client reads the answer. Node's own handler writes it and
 * destroys the socket at once: the bytes the client is still sending (the rest of 8,000 headers,
 * of one 100 KB header) then make the kernel reset the connection, and the client sees the reset
 * instead of the 431. Here the answer is sent with a FIN and what still arrives is read and
 * dropped, within DRAIN_MS and DRAIN_BYTES.
 */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (socket.destroyed) return;
    // Node's own rule: no answer into the middle of a response already under way on this connection.
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    // The parser may report again on what follows: one answer per connection.
    if (answered.has(socket)) return;
    answered.add(socket);
    const [status, reason] = statusOf(err.code);
    const body = `${reason.toLowerCase()}\n`;
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Type: text/plain\r\n` +
        `Content-Length: ${body.length}\r\n\r\n${body}`,
    );
    let drained = 0;
    socket.removeAllListeners('data');
    socket.on('data', (chunk: Buffer) => {
      drained += chunk.length;
      if (drained > DRAIN_BYTES) socket.destroy();
    });
    socket.resume();
    setTimeout(() => socket.destroy(), DRAIN_MS).unref();
  });
}

const answered = new WeakSet<Socket>();
