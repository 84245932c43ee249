import { describe, expect, it } from 'vitest';
import { parseNoProxy } from './no-proxy.ts';

const direct = (list: string, url: string) => parseNoProxy(list)(new URL(url));

describe('EGRESS_NO_PROXY', () => {
  it('matches a name and the names under it, with or without a leading dot', () => {
    expect(direct('example.com', 'https://example.com/')).toBe(true);
    expect(direct('example.com', 'https://api.example.com/')).toBe(true);
    expect(direct('.example.com', 'https://api.example.com/')).toBe(true);
    expect(direct('example.com', 'https://badexample.com/')).toBe(false);
    expect(direct('example.com', 'https://example.com.evil.test/')).toBe(false);
  });

  it('matches IP literals exactly, ports when given, and everything with *', () => {
    expect(direct('10.0.0.5', 'http://10.0.0.5:8080/')).toBe(true);
    expect(direct('10.0.0.5', 'http://10.0.0.50/')).toBe(false);
    expect(direct('[::1]:8443', 'https://[::1]:8443/')).toBe(true);
    expect(direct('internal.test:8443', 'https://internal.test/')).toBe(false);
    expect(direct('internal.test:443', 'https://internal.test/')).toBe(true);
    expect(direct(' a.test , * ', 'https://anything.test/')).toBe(true);
    expect(direct('', 'https://anything.test/')).toBe(false);
  });
});
