import { envelope, get, ordered, post, type RequesterClient, requestId } from '@requester/client';
import { Hono } from 'hono';

/**
 * A small service that calls a partner through Requester instead of calling it itself: orders are
 * sent async (ordered per order, so an update never overtakes its create), quotes are sync calls,
 * and a caller may ask how an order's call went.
 */
export interface PartnerServiceOptions {
  requester: RequesterClient;
  /** The partner's base URL, as Requester reaches it. */
  partnerUrl: string;
}

export interface Order {
  id: string;
  items: Array<{ sku: string; quantity: number }>;
}

export function createApp({ requester, partnerUrl }: PartnerServiceOptions): Hono {
  const app = new Hono();

  app.post('/orders', async (c) => {
    const order = (await c.req.json()) as Order;
    // A requestId derived from the order: a retry of this handler sends the same request again,
    // which Requester accepts as the same one (it runs once).
    const id = await requester.send(
      envelope(
        post(`${partnerUrl}/orders`, order),
        ordered(`order-${order.id}`),
        requestId(`order-${order.id}`),
      ),
    );
    return c.json({ requestId: id }, 202);
  });

  app.get('/orders/:id/delivery', async (c) => {
    const result = await requester.result(`order-${c.req.param('id')}`, { waitMs: 5_000 });
    if (!result) return c.json({ status: 'pending' }, 404);
    return c.json({ partnerStatus: result.response.status, attempts: result.meta.tryCount });
  });

  app.get('/quotes/:sku', async (c) => {
    const result = await requester.call(
      envelope(get(`${partnerUrl}/quotes/${encodeURIComponent(c.req.param('sku'))}`)),
      {
        timeoutMs: 20_000,
      },
    );
    if (result.response.status !== 200)
      return c.json({ error: result.meta.error?.code ?? 'partner_error' }, 502);
    return c.json(JSON.parse(result.response.body) as unknown);
  });

  return app;
}
