import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { clientScoped } from './namespace.ts';
import { parseRequestEnvelope } from './request.ts';

/** What the contract accepts as a name or a client: printable ASCII without spaces. */
const printable = fc.stringMatching(/^[\x21-\x7e]{1,20}$/);

describe('clientScoped', () => {
  it('leaves a name without a client as it is: records without meta.client keep their keys', () => {
    expect(clientScoped(undefined, '!order-42')).toBe('!order-42');
    expect(clientScoped('', 'rid-1:0')).toBe('rid-1:0');
  });

  it('keeps the name first, so an ordered partition still starts with "!"', () => {
    expect(clientScoped('probe-a', '!order-42')).toBe('!order-42 @probe-a');
    expect(clientScoped('probe-a', '!order-42').startsWith('!')).toBe(true);
  });

  it('never maps two different (client, name) pairs, nor a scoped and an unscoped name, to one key', () => {
    fc.assert(
      fc.property(
        fc.option(printable, { nil: undefined }),
        printable,
        fc.option(printable, { nil: undefined }),
        printable,
        (c1, n1, c2, n2) => {
          if (c1 === c2 && n1 === n2) return;
          expect(clientScoped(c1, n1)).not.toBe(clientScoped(c2, n2));
        },
      ),
    );
  });

  it('relies on the contract: no requestId, partition or client may hold a space', () => {
    const envelope = (meta: Record<string, unknown>) => () =>
      parseRequestEnvelope({ request: { uri: '' }, meta: { requestId: 'r', ...meta } });
    expect(envelope({ requestId: 'a @b' })).toThrow(/printable ASCII without spaces/);
    expect(envelope({ partition: '!a @b' })).toThrow(/printable ASCII without spaces/);
    expect(envelope({ client: 'a b' })).toThrow(/printable ASCII without spaces/);
    expect(envelope({ cache: { key: 'a @b', ttl: '1m' } })).toThrow(/printable ASCII without spaces/);
    const rates = [{ duration: '1s', value: 1 }];
    expect(envelope({ limiter: { key: 'a @b', algorithm: 'token-bucket', rates } })).toThrow(
      /printable ASCII without spaces/,
    );
  });
});
