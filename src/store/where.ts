// A WHERE clause built from optional filters, with numbered parameters, for the list queries.
export class Where {
  readonly args: unknown[] = [];
  private readonly parts: string[] = [];

  /** Adds `sql` (each `?` in it stands for the value) when value is defined. */
  add(sql: string, value: unknown): this {
    if (value === undefined) return this;
    this.args.push(value);
    this.parts.push(sql.replaceAll('?', `$${this.args.length}`));
    return this;
  }

  /** The next parameter's placeholder for `value` (e.g. a LIMIT). */
  param(value: unknown): string {
    this.args.push(value);
    return `$${this.args.length}`;
  }

  toString(): string {
    return this.parts.length > 0 ? `WHERE ${this.parts.join(' AND ')}` : '';
  }
}
