// The boot data of an instance (DESIGN §5): what the dispatcher hands to the driver's create() and the
// machine's agent reads back at boot — the API to call, the node it is, and the one-time secret proving
// it. One shape for every driver (local, the simulator, the chaos world, a cloud's user data), written
// by encodeBootData and read by parseBootData.
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { CloudApiError } from './errors.js';

const NonEmpty = Type.String({ minLength: 1, maxLength: 4096 });

export const BootDataSchema = Type.Object(
  {
    /** The API the agent calls ("sim:" where there is none: the simulator and the chaos world). */
    api_url: NonEmpty,
    node_id: NonEmpty,
    bootstrap_secret: NonEmpty,
    instance_type: NonEmpty,
  },
  { additionalProperties: false },
);
export type BootData = Static<typeof BootDataSchema>;

/** Boot data that does not parse; `field` names what is wrong. */
export class BootDataError extends Error {
  constructor(
    readonly field: string,
    problem: string,
  ) {
    super(`boot data: ${field}: ${problem}`);
  }
}

export function encodeBootData(b: BootData): string {
  return JSON.stringify(b);
}

/** The dispatcher's bootData option: boot data for each new node, pointing its agent at `apiUrl`. */
export function bootDataFor(apiUrl: string) {
  return (n: { nodeId: string; bootstrapSecret: string; instanceType: { name: string } }): string =>
    encodeBootData({
      api_url: apiUrl,
      node_id: n.nodeId,
      bootstrap_secret: n.bootstrapSecret,
      instance_type: n.instanceType.name,
    });
}

/** Reads boot data back; throws BootDataError naming the first field that is missing or wrong. */
export function parseBootData(text: string): BootData {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new BootDataError('(all)', `expected JSON {${Object.keys(BootDataSchema.properties).join(', ')}}`);
  }
  const first = Value.Errors(BootDataSchema, v).First();
  if (first) {
    const field = first.path.replace(/^\//, '').replace(/\//g, '.') || '(all)';
    throw new BootDataError(field, first.message);
  }
  return v as BootData;
}

/** create()'s bootData as a driver reads it: a CloudApiError (not retryable) naming what is wrong. */
export function bootDataOf(text: string): BootData {
  try {
    return parseBootData(text);
  } catch (err) {
    if (err instanceof BootDataError) throw new CloudApiError(err.message, false);
    throw err;
  }
}
