// The dispatcher's log: one line per action it takes or fails to take, with the container, instance,
// instance type and node as fields, and the class of the error for a failure. Actions are at info
// (locks and deferred starts, frequent and routine, at debug); cloud refusals and lost nodes at warn;
// failed actions at error (the next pass retries them: the line says what failed, not that all is lost).
import type { Logger } from '../log/logger.js';
import type { DispatchEvent } from './dispatcher.js';

/** An onEvent handler that logs every dispatcher event through `logger`. */
export function logDispatchEvents(logger: Logger): (e: DispatchEvent) => void {
  return (e) => {
    switch (e.kind) {
      case 'instance-created':
        logger.info(
          { instance: e.instance, instance_type: e.type, price: e.price, containers: e.for },
          'instance created',
        );
        break;
      case 'instance-ready':
        logger.info({ instance: e.instance }, 'instance ready: its agent registered');
        break;
      case 'instance-shutdown':
        logger.info({ instance: e.instance, reason: e.reason }, 'instance shutting down');
        break;
      case 'instance-destroyed':
        logger.info({ instance: e.instance, instance_type: e.type }, 'instance destroy requested');
        break;
      case 'instance-gone':
        logger.info({ instance: e.instance }, 'instance gone from the cloud');
        break;
      case 'instance-interrupted':
        logger.warn(
          { instance: e.instance, notice_at: e.noticeAt.toISOString() },
          'instance will be reclaimed by the cloud: draining it',
        );
        break;
      case 'containers-locked':
        for (const c of e.containers) logger.debug({ container: c }, 'container locked');
        for (const c of e.refused) logger.debug({ container: c }, 'container not locked: taken or changed');
        break;
      case 'container-placed':
        logger.info({ container: e.container, instance: e.instance }, 'container placed');
        break;
      case 'start-deferred':
        logger.debug(
          { container: e.container, instance: e.instance, reason: e.reason },
          'container not placed yet',
        );
        break;
      case 'container-unlocked':
        logger.info({ container: e.container, reason: e.reason }, 'container unlocked');
        break;
      case 'container-cancelled':
        logger.info(
          { container: e.container, failure_class: e.failureClass, reason: e.reason },
          'container cancelled',
        );
        break;
      case 'node-lost':
        logger.warn({ node: e.node, instance: e.instance, reason: e.reason }, 'node lost');
        break;
      case 'create-failed':
        logger.warn(
          { op: 'create', instance_type: e.type, error_class: e.errorClass, error: e.message },
          'instance create failed',
        );
        break;
      case 'error':
        logger.error(
          {
            op: e.op,
            container: e.container,
            instance: e.instance,
            instance_type: e.type,
            node: e.node,
            error_class: e.errorClass,
            error: e.message,
          },
          `${e.op} failed (retried at a later pass)`,
        );
        break;
    }
  };
}
