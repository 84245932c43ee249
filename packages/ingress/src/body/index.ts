/**
 * Reads a JSON request body with a hard size bound. The bound is enforced while reading: a
 * declared Content-Length above it is refused before a byte is read, and a chunked (or lying)
 * body is cut off as soon as the running total passes it, so an oversize upload never sits in
 * memory whole.
 */
export type BodyRead =
  | { ok: true; value: unknown; bytes: number }
  | { ok: false; status: 400 | 413; message: string };

export async function readJsonBody(request: Request, maxBytes: number): Promise<BodyRead> {
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > maxBytes) return tooLarge(maxBytes);
  const bytes = await readBounded(request.body, maxBytes);
  if (bytes === undefined) return tooLarge(maxBytes);
  if (bytes.length === 0)
    return { ok: false, status: 400, message: 'the request body is empty; expected JSON' };
  const text = decode(bytes);
  if (text === undefined) return { ok: false, status: 400, message: 'the request body is not valid UTF-8' };
  try {
    return { ok: true, value: JSON.parse(text), bytes: bytes.length };
  } catch (err) {
    return { ok: false, status: 400, message: `malformed JSON: ${(err as Error).message}` };
  }
}

function tooLarge(maxBytes: number): BodyRead {
  return {
    ok: false,
    status: 413,
    message: `the request body is larger than the limit of ${maxBytes} bytes`,
  };
}

/** The whole body, or undefined as soon as it passes `maxBytes` (the rest is never read). */
async function readBounded(
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
): Promise<Uint8Array | undefined> {
  if (!body) return new Uint8Array();
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel('body too large').catch(() => {});
      return undefined;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, total);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function decode(bytes: Uint8Array): string | undefined {
  try {
    return utf8.decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * Whether a Content-Type names JSON: `application/json` or `application/<anything>+json`, with any
 * parameters. The media types a browser may send cross-site without a CORS preflight (`text/plain`,
 * forms) are not, so a web page cannot make a visitor's browser submit requests.
 */
export function isJsonMediaType(contentType: string | null | undefined): boolean {
  const essence = contentType?.split(';', 1)[0]?.trim().toLowerCase() ?? '';
  return essence === 'application/json' || /^application\/[\w.+-]+\+json$/.test(essence);
}
