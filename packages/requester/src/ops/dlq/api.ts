import { UsageError } from '@requester/shared';
import { html } from 'hono/html';
import type { AdminConsole } from '../../admin-server/console.ts';
import { answer, type Body, bodyOf, limitOf, list, revealTo, stringOf } from '../../admin-server/http.ts';
import { mayReveal, type Operator } from '../../admin-server/operator.ts';
import type { ApiFace } from '../faces.ts';
import { type DlqSelection, dlqFilterFrom, listDeadLetterViews, replayFromDlq } from './index.ts';

/** Dead letters not marked handled, newest first; `revealTo`: shown in full, recorded as theirs. */
export async function deadLetters(
  console: AdminConsole,
  selection: DlqSelection,
  limit: number,
  revealTo?: Operator,
) {
  const view = await deadLetterViews(console, selection, limit, mayReveal(revealTo));
  if (revealTo)
    await console.reveal(
      revealTo,
      'dlq',
      view.entries.map((e) => e.requestId),
    );
  return view;
}

export async function deadLetterViews(
  console: AdminConsole,
  selection: DlqSelection,
  limit: number,
  reveal: boolean,
) {
  const filter = dlqFilterFrom(selection);
  filter.exclude = await console.handled().then((h) => h.refs(console.config.topicDlq));
  return listDeadLetterViews(console.dlqSource(), filter, limit, reveal);
}

async function replay(
  console: AdminConsole,
  operator: Operator,
  selection: DlqSelection & { force?: boolean; dryRun?: boolean },
) {
  const filter = dlqFilterFrom(selection);
  if (Object.keys(filter).length === 0)
    throw new UsageError(
      'replay needs a selection: refs, requestIds, since/until, origin, errorCode, client or destination',
    );
  const dryRun = selection.dryRun ?? false;
  const summary = await replayFromDlq(
    console.dlqSource(),
    {
      producer: await console.deps.producer(),
      redis: console.deps.redis(),
      config: console.config,
      signer: () => console.deps.entrySigner(),
    },
    { filter, dryRun, force: selection.force ?? false },
  );
  if (!dryRun)
    await console.record(operator, 'dlq.replay', {
      // A replay of one destination's dead letters is its recover: in the destination's journal too.
      ...(selection.destination ? { destination: selection.destination } : {}),
      requestIds: summary.replayed.map((r) => r.requestId),
    });
  return summary;
}

/**
 * Marks the dead letters at these DLQ positions as handled (see HandledDeadLetters): one read of
 * the DLQ, which keeps the selected records alone.
 */
async function deleteDeadLetters(console: AdminConsole, operator: Operator, refs: string[]) {
  const { entries } = await deadLetters(console, { refs }, Number.MAX_SAFE_INTEGER);
  const marked = await (await console.handled()).mark(entries, operator.name);
  await console.record(operator, 'dlq.delete', {
    refs: entries.map((e) => e.ref),
    requestIds: entries.flatMap((e) => (e.requestId ? [e.requestId] : [])),
  });
  return { marked, refs: entries.map((e) => e.ref) };
}

/** The selection of a query or a body (the UI's filter form, the API's parameters). */
export function selectionOf(query: Body): DlqSelection {
  const selection: DlqSelection = {};
  const ids = list(query.requestIds ?? query.requestId);
  if (ids.length) selection.requestIds = ids;
  for (const key of ['since', 'until', 'origin', 'errorCode', 'client', 'destination'] as const) {
    const value = stringOf(query[key])?.trim();
    if (value) selection[key] = value;
  }
  return selection;
}

export const api: ApiFace = {
  paths: {
    '/admin/api/dlq': {
      get: {
        summary: 'Dead letters, newest first, without those marked handled (requester dlq list)',
        params: ['requestId', 'since', 'until', 'origin', 'errorCode', 'client', 'destination', 'limit'],
        reveal: true,
      },
      post: undefined,
    },
    '/admin/api/dlq/replay': {
      get: undefined,
      post: {
        summary:
          'Replay the selected dead letters to in (requester dlq replay); needs a write key. dryRun: true is the preview (what would be replayed, nothing written). Resumable: a replayed dead letter is marked (DLQ_REPLAY marks in Redis) and skipped by a later run unless force',
        write: true,
        body: {
          requestIds: { type: 'array', items: { type: 'string' } },
          refs: {
            type: 'array',
            items: { type: 'string' },
            description: 'DLQ positions topic/partition/offset',
          },
          since: { type: 'string', format: 'date-time' },
          until: { type: 'string', format: 'date-time' },
          origin: { type: 'string' },
          errorCode: { type: 'string' },
          client: { type: 'string' },
          destination: { type: 'string', description: "meta.destination: a destination's recover" },
          force: { type: 'boolean' },
          dryRun: { type: 'boolean', description: 'the preview: count and list, write nothing' },
        },
      },
    },
    '/admin/api/dlq/delete': {
      get: undefined,
      post: {
        summary: 'Mark dead letters as handled (requester dlq delete): left out of lists from then on',
        write: true,
        body: { refs: { type: 'array', items: { type: 'string' } } },
      },
    },
  },
  routes(app, console) {
    app.get('/admin/api/dlq', async (c) =>
      c.json(
        await deadLetters(
          console,
          selectionOf(c.req.query()),
          limitOf(c.req.query('limit'), 50),
          revealTo(c),
        ),
      ),
    );
    app.post('/admin/api/dlq/replay', async (c) => {
      const body = await bodyOf(c);
      const selection = selectionOf(body);
      // The UI's checkboxes name DLQ positions: those very records are replayed (not each one's
      // request's latest), selected within the one read of the DLQ that the replay makes.
      const refs = list(body.refs);
      if (refs.length) selection.refs = refs;
      const force = body.force === true || body.force === 'true';
      const dryRun = body.dryRun === true || body.dryRun === 'true';
      const summary = await replay(console, c.get('operator'), { ...selection, force, dryRun });
      // The UI's confirm step: the preview's answer holds the button that replays.
      if (dryRun && c.req.header('hx-request')) {
        const n = summary.replayed.length;
        return c.html(
          html`<div class="flash" data-preview="${n}">${n} dead letters would be replayed (${summary.skipped.alreadyReplayed} replayed before, ${summary.skipped.superseded} superseded). ${
            n > 0
              ? html`<button hx-post="/admin/api/dlq/replay" hx-vals='${JSON.stringify({ ...selection, ...(force ? { force } : {}) })}' hx-target="#flash" data-action="confirm-replay">Replay these ${n}</button>`
              : ''
          }</div>`,
        );
      }
      if (dryRun) return c.json(summary);
      return answer(
        c,
        summary,
        `Replayed ${summary.replayed.length} to in (${summary.skipped.alreadyReplayed} replayed before).`,
      );
    });
    app.post('/admin/api/dlq/delete', async (c) => {
      const refs = list((await bodyOf(c)).refs);
      if (refs.length === 0)
        throw new UsageError('delete needs refs: the DLQ positions topic/partition/offset');
      const result = await deleteDeadLetters(console, c.get('operator'), refs);
      return answer(c, result, `Marked ${result.marked} dead letters as handled.`);
    });
  },
};
