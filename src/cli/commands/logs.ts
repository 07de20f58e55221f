// `berth logs ID [-f]`: a container's stdout and stderr, or for a request (r-…) those of every attempt in
// order; -f follows until the container ends, or for a request until the request is Final (retries too).
import type { Command } from 'commander';
import type { LogChunk } from '../../store/logs.js';
import type { ContainerRecord, RequestRecord } from '../../store/records.js';
import { sleepUnless } from '../../model/clock.js';
import { clientFor, type Client } from '../client.js';
import { UsageError } from '../errors.js';

function write(chunk: LogChunk): void {
  if (chunk.stream === 'stderr') process.stderr.write(chunk.data);
  else if (chunk.stream === 'system')
    process.stderr.write(`[berth] ${chunk.data}${chunk.data.endsWith('\n') ? '' : '\n'}`);
  else process.stdout.write(chunk.data);
}

/** Sleeps ms, or rejects at once with the signal's reason when it aborts. */
async function pause(ms: number, signal?: AbortSignal): Promise<void> {
  await sleepUnless(ms, signal);
  signal?.throwIfAborted();
}

/** Checks an id's kind; returns 'r' or 'c'. */
export function idKind(id: string): 'r' | 'c' {
  if (id.startsWith('r-')) return 'r';
  if (id.startsWith('c-')) return 'c';
  throw new UsageError(`expected a request id (r-…) or a container id (c-…), got ${JSON.stringify(id)}`);
}

/** Resolves a request id to its current container; a container id is returned as is. */
export async function containerOf(client: Client, id: string): Promise<string> {
  if (idKind(id) === 'c') return id;
  const req = await client.request<RequestRecord>('GET', `/v1/requests/${id}`);
  if (!req.container_id) throw new UsageError(`${id} has no container`);
  return req.container_id;
}

/** A request's containers (attempts), first attempt first. */
export async function attemptsOf(client: Client, requestId: string): Promise<ContainerRecord[]> {
  const page = await client.request<{ items: ContainerRecord[] }>(
    'GET',
    `/v1/containers?request_id=${requestId}&limit=1000`,
  );
  return page.items.sort((a, b) => a.attempt - b.attempt);
}

/** Prints every log chunk of a container so far. */
export async function printLogs(client: Client, cid: string): Promise<void> {
  let after = -1;
  for (;;) {
    const page = await client.request<{ items: LogChunk[] }>(
      'GET',
      `/v1/containers/${cid}/logs?after=${after}&limit=1000`,
    );
    page.items.forEach(write);
    if (page.items.length < 1000) return;
    after = page.items[page.items.length - 1]!.seq;
  }
}

/** Streams a container's logs (SSE) until it ends; reconnects from the last chunk seen if cut off. */
export async function followLogs(client: Client, cid: string, signal?: AbortSignal): Promise<void> {
  let after = -1;
  for (let attempt = 0; attempt < 100; attempt++) {
    const res = await client.stream(`/v1/containers/${cid}/logs?follow=true&after=${after}`, signal);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let ended = false;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const event = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const type = /^event: (.*)$/m.exec(event)?.[1];
          const data = /^data: (.*)$/m.exec(event)?.[1];
          if (type === 'log' && data) {
            const chunk = JSON.parse(data) as LogChunk;
            write(chunk);
            after = chunk.seq;
          } else if (type === 'end') ended = true;
        }
      }
    } catch (err) {
      if (signal?.aborted) throw err;
      // connection cut: reconnect from `after`
    }
    if (ended) return;
    await pause(500, signal);
  }
}

/** Announces an attempt after the first, on stderr (stdout carries only the containers' output). */
function announce(requestId: string, c: ContainerRecord): void {
  if (c.attempt > 1) console.error(`berth: ${requestId}: attempt ${c.attempt} (${c.id})`);
}

/**
 * Follows every attempt of a request, in order, until the request is Final: each container's output is
 * printed in full, even when several attempts ended while an earlier one was being printed. Returns the
 * Final request. `signal` stops it (a rejection with the signal's reason).
 */
export async function followRequest(
  client: Client,
  requestId: string,
  signal?: AbortSignal,
): Promise<RequestRecord> {
  const followed = new Set<string>();
  for (;;) {
    // The request first: once it is Final, the list of its containers read after it is complete.
    const req = await client.request<RequestRecord>('GET', `/v1/requests/${requestId}`);
    const pending = (await attemptsOf(client, requestId)).filter((c) => !followed.has(c.id));
    for (const c of pending) {
      announce(requestId, c);
      await followLogs(client, c.id, signal);
      followed.add(c.id);
    }
    if (req.state === 'Final' && pending.length === 0) return req;
    // The last container ended and its retry is being queued (or the request is about to be Final).
    if (pending.length === 0) await pause(200, signal);
  }
}

/** Prints the output of every attempt of a request so far, in order. */
async function printRequestLogs(client: Client, requestId: string): Promise<void> {
  for (const c of await attemptsOf(client, requestId)) {
    announce(requestId, c);
    await printLogs(client, c.id);
  }
}

export function registerLogs(program: Command): void {
  program
    .command('logs')
    .description("print a container's logs; for a request (r-…), those of every attempt in order")
    .argument('<id>', 'request (r-…) or container (c-…) id')
    .option('-f, --follow', 'keep printing until the container ends (a request: until it is final)')
    .action(async (id: string, opts: { follow?: boolean }, cmd: Command) => {
      const client = clientFor(cmd);
      if (idKind(id) === 'r') {
        if (opts.follow) await followRequest(client, id);
        else await printRequestLogs(client, id);
      } else if (opts.follow) await followLogs(client, id);
      else await printLogs(client, id);
    });
}
