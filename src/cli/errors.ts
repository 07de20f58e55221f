// Errors a command throws for the user: printed as "berth: message" without a stack.
export class UsageError extends Error {
  constructor(
    message: string,
    readonly exitCode = 2,
  ) {
    super(message);
  }
}
