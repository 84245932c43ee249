import { CLIENT_SCOPE_SEPARATOR, clientScoped } from '@requester/shared/contract';
import { describe, expect, it } from 'vitest';
import { CLIENT_SEPARATOR, clientOfPartition } from './keys.ts';

describe('clientOfPartition', () => {
  it('reads the client the namespace of @requester/shared/contract put in a partition name', () => {
    // commands/includes/shard.lua (clientOf) hardcodes the same separator.
    expect(CLIENT_SEPARATOR).toBe(CLIENT_SCOPE_SEPARATOR);
    expect(clientOfPartition(clientScoped('billing', '!order-42'))).toBe('billing');
    expect(clientOfPartition(clientScoped('billing', '#req-1'))).toBe('billing');
    expect(clientOfPartition(clientScoped(undefined, '!order-42'))).toBe('');
  });
});
