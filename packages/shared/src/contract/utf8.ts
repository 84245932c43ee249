const strict = new TextDecoder('utf-8', { fatal: true });

/**
 * Bytes as text, or undefined when they are not valid UTF-8. Both doors read a request this way
 * (the HTTP body, an `in` record): a bad byte sequence is refused, never replaced by U+FFFD, so
 * what is called is what the caller sent.
 */
export function decodeUtf8(bytes: Uint8Array): string | undefined {
  try {
    return strict.decode(bytes);
  } catch {
    return undefined;
  }
}
