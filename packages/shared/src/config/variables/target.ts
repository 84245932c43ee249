/** The HTTP call to a target: timeouts, size, redirects, the SSRF guard, the egress proxy. */

import { z } from 'zod';
import { addressList, bool, goDuration, positiveInt } from '../values.ts';
import { variable } from '../variable.ts';

export const targetVariables = {
  targetConnectTimeout: variable(
    'TARGET_CONNECT_TIMEOUT',
    '5s',
    goDuration,
    'bound on DNS lookup, TCP connect and TLS handshake with a target',
  ),
  targetResponseTimeout: variable(
    'TARGET_RESPONSE_TIMEOUT',
    '30s',
    goDuration,
    "bound on waiting for a target's response headers, and again on reading its body (504 beyond)",
  ),
  targetMaxResponseBytes: variable(
    'TARGET_MAX_RESPONSE_BYTES',
    '10485760',
    positiveInt,
    'largest target response body kept (decompressed); larger ones answer 502 payload_too_large',
  ),
  targetFollowRedirects: variable(
    'TARGET_FOLLOW_REDIRECTS',
    'false',
    bool,
    'follow 3xx redirects of targets (each hop checked like the first); off = the 3xx is the result',
  ),
  allowPrivateTargets: variable(
    'ALLOW_PRIVATE_TARGETS',
    '',
    addressList,
    "private/loopback/link-local targets that may be called: comma-separated IPs or CIDRs, each with an optional port (`127.0.0.1:8081`, `10.0.0.0/8:443`, `[::1]:8080`; none = any port), or * for all. Requester's own HTTP_PORT and ADMIN_PORT and its Kafka (brokers and KAFKA_CONTROLLERS), Redis and PostgreSQL ports are refused on loopback, this machine's addresses and their configured hosts whatever this says",
  ),
  egressProxy: variable(
    'EGRESS_PROXY',
    undefined,
    z.string().url().optional(),
    'HTTP proxy for every call to a target (`http://[user:pass@]host:port`, or `https://…` for TLS to the proxy itself, then CONNECT or forwarding inside it): CONNECT for https targets, forwarding for http ones. The SSRF guard still judges each target; the proxy itself is allowed. Unset = direct',
  ),
  egressProxyCaFile: variable(
    'EGRESS_PROXY_CA_FILE',
    undefined,
    z.string().optional(),
    "a PEM file of CA certificates trusted for an https proxy (EGRESS_PROXY, or a credential's own) instead of the system's",
  ),
  egressNoProxy: variable(
    'EGRESS_NO_PROXY',
    '',
    z.string(),
    'comma-separated hosts called directly despite EGRESS_PROXY: a name matches itself and its subdomains (`example.com`, `.example.com`), `*` matches all, an entry may carry a port (`host:8443`)',
  ),
};
