// The boot data a dispatcher hands to a driver's create() (DESIGN §5): what the new instance's agent needs
// to find the API and prove who it is. Every driver parses it here.
import { CloudApiError } from './errors.js';

/** The boot data of an instance (JSON). */
export interface BootData {
  api_url: string;
  node_id: string;
  bootstrap_secret: string;
  instance_type?: string;
}

/** Parses create()'s bootData; throws a CloudApiError (not retryable) naming what is missing. */
export function parseBootData(bootData: string): BootData {
  let d: Partial<BootData>;
  try {
    d = JSON.parse(bootData) as Partial<BootData>;
  } catch {
    throw new CloudApiError('bootData: expected JSON {api_url, node_id, bootstrap_secret}', false);
  }
  for (const k of ['api_url', 'node_id', 'bootstrap_secret'] as const)
    if (typeof d[k] !== 'string' || d[k] === '')
      throw new CloudApiError(`bootData.${k}: expected a non-empty string`, false);
  return d as BootData;
}
