// Files the local server writes to BERTH_HOME so the CLI on the same machine needs no setup.
/** The admin token created on the first start (mode 0600). */
export const ADMIN_TOKEN_FILE = 'admin-token';
/** The URL the server listens on, while it runs. */
export const API_URL_FILE = 'api-url';
