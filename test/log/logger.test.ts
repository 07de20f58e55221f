// The process logger: JSON lines with the ids as fields, secrets redacted, readable lines on a terminal.
import { describe, expect, it } from 'vitest';
import { createLogger, errorFields, formatLine, redactUrl } from '../../src/log/logger.js';

function capture(level = 'info', pretty = false) {
  const lines: string[] = [];
  const logger = createLogger({
    name: 'berth test',
    level,
    pretty,
    destination: { write: (l) => lines.push(l) },
  });
  return { logger, lines, json: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe('createLogger', () => {
  it('writes one JSON line per entry, with the child ids as fields', () => {
    const { logger, json } = capture();
    logger.child({ dispatcher: 'c/t' }).info({ instance: 'i-1', instance_type: 't1' }, 'instance created');
    expect(json()).toEqual([
      expect.objectContaining({
        level: 30,
        name: 'berth test',
        dispatcher: 'c/t',
        instance: 'i-1',
        instance_type: 't1',
        msg: 'instance created',
        time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      }),
    ]);
  });

  it('writes nothing below its level', () => {
    const { logger, lines } = capture('warn');
    logger.info('hidden');
    logger.debug('hidden');
    logger.warn('shown');
    expect(lines).toHaveLength(1);
  });

  it('redacts tokens and secrets, and passwords in the URLs of a logged config', () => {
    const { logger, lines } = capture();
    logger.info(
      {
        config: {
          token: 'bt_admin_secret',
          database_url: 'postgres://berth:pw-secret@db.example:5432/berth',
          listen: '127.0.0.1:0',
        },
        bootstrap_secret: 'boot-secret',
        node: { token: 'node-secret' },
      },
      'configuration',
    );
    const text = lines.join('');
    for (const secret of ['bt_admin_secret', 'pw-secret', 'boot-secret', 'node-secret'])
      expect(text).not.toContain(secret);
    const e = JSON.parse(lines[0]!) as { config: Record<string, string> };
    expect(e.config.database_url).toBe('postgres://berth:[redacted]@db.example:5432/berth');
    expect(e.config.token).toBe('[redacted]');
    expect(e.config.listen).toBe('127.0.0.1:0');
  });

  it('redacts secrets at any depth of a logged dispatch config, and nothing else', () => {
    const { logger, lines } = capture();
    logger.info(
      {
        dispatch: {
          cluster: 'c',
          driver: {
            ec2: { region: 'us-east-1', secret_access_key: 'AKIA-secret', session_token: 'st-secret' },
          },
          instance_types: [{ name: 'small', vcpus: 1 }],
        },
      },
      'configuration',
    );
    expect(lines.join('')).not.toMatch(/AKIA-secret|st-secret/);
    expect(JSON.parse(lines[0]!).dispatch).toEqual({
      cluster: 'c',
      driver: { ec2: { region: 'us-east-1', secret_access_key: '[redacted]', session_token: '[redacted]' } },
      instance_types: [{ name: 'small', vcpus: 1 }],
    });
  });

  it('writes readable lines when pretty', () => {
    const { logger, lines } = capture('info', true);
    logger.warn(
      { op: 'destroy', instance: 'i-3', ...errorFields(new TypeError('cloud said no')) },
      'action failed',
    );
    logger.info('plain');
    expect(lines).toEqual([
      'berth test: warning: action failed (op=destroy instance=i-3 error_class=TypeError error="cloud said no")\n',
      'berth test: plain\n',
    ]);
  });
});

describe('helpers', () => {
  it('redactUrl masks only the password', () => {
    expect(redactUrl('postgres://u:p@h/db')).toBe('postgres://u:[redacted]@h/db');
    expect(redactUrl('postgres://u@h/db')).toBe('postgres://u@h/db');
    expect(redactUrl('http://127.0.0.1:8470')).toBe('http://127.0.0.1:8470');
  });

  it('formatLine passes through what is not JSON, and shows an error without its stack', () => {
    expect(formatLine('not json\n')).toBe('not json\n');
    const line = JSON.stringify({
      level: 50,
      name: 'n',
      msg: 'm',
      err: { type: 'Error', message: 'x', stack: 'at y' },
    });
    expect(formatLine(line)).toBe('n: error: m (err="Error: x")\n');
  });

  it('errorFields names the class of anything thrown', () => {
    class QuotaError extends Error {}
    expect(errorFields(new QuotaError('full'))).toEqual({ error_class: 'QuotaError', error: 'full' });
    expect(errorFields('text')).toEqual({ error_class: 'string', error: 'text' });
  });
});
