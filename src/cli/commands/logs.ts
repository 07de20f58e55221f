// `berth logs ID [-f]`: a container's (or a request's current container's) stdout and stderr.
import type { Command } from 'commander';
import type { LogChunk } from '../../store/logs.js';
import type { RequestRecord } from '../../store/records.js';
import { clientFor, type Client } from '../client.js';
import { UsageError } from '../errors.js';

function write(chunk: LogChunk): void {
  if (chunk.stream === 'stderr') process.stderr.write(chunk.data);
  else if (chunk.stream === 'system')
    process.stderr.write(`[berth] ${chunk.data}${chunk.data.endsWith('\n') ? '' : '\n'}`);
  else process.stdout.write(chunk.data);
}

/** Resolves a request id to its current container; a container id is returned as is. */
export async function containerOf(client: Client, id: string): Promise<string> {
  if (id.startsWith('c-')) return id;
  if (id.startsWith('r-')) {
    const req = await client.request<RequestRecord>('GET', `/v1/requests/${id}`);
    if (!req.container_id) throw new UsageError(`${id} has no container`);
    return req.container_id;
  }
  throw new UsageError(`expected a request id (r-…) or a container id (c-…), got ${JSON.stringify(id)}`);
}

/** Prints every log chunk so far. */
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
export async function followLogs(client: Client, cid: string): Promise<void> {
  let after = -1;
  for (let attempt = 0; attempt < 100; attempt++) {
    const res = await client.stream(`/v1/containers/${cid}/logs?follow=true&after=${after}`);
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
    } catch {
      // connection cut: reconnect from `after`
    }
    if (ended) return;
    await new Promise((r) => setTimeout(r, 500));
  }
}

export function registerLogs(program: Command): void {
  program
    .command('logs')
    .description("print a container's logs (a request id means its current container)")
    .argument('<id>', 'request (r-…) or container (c-…) id')
    .option('-f, --follow', 'keep printing until the container ends')
    .action(async (id: string, opts: { follow?: boolean }, cmd: Command) => {
      const client = clientFor(cmd);
      const cid = await containerOf(client, id);
      if (opts.follow) await followLogs(client, cid);
      else await printLogs(client, cid);
    });
}
