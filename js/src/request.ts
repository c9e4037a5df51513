import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** Where the server extension lives, relative to the server's base URL. */
export const API_PATH = 'trainwatch-lab/api';

/** Thrown for a non-2xx answer; carries the server's one-line ``error`` message. */
export class APIError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
  }
}

/**
 * Call a REST endpoint of the server extension (Jupyter's auth and XSRF handled by
 * ServerConnection); returns the parsed JSON body.
 */
export async function requestAPI<T>(
  endPoint = '',
  init: RequestInit = {},
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<T> {
  const url = URLExt.join(settings.baseUrl, API_PATH, endPoint);
  let response: Response;
  try {
    // no-store: fresh data without ServerConnection's "?<timestamp>" cache buster
    response = await ServerConnection.makeRequest(url, { cache: 'no-store', ...init }, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  const text = await response.text();
  let data: any = text;
  if (text.length > 0) {
    try {
      data = JSON.parse(text);
    } catch {
      // not JSON (a proxy's error page): keep the text
    }
  }
  if (!response.ok) {
    const message = (data && (data.error || data.message)) || response.statusText;
    throw new APIError(response.status, String(message));
  }
  return data as T;
}

/** The WebSocket URL of the sample stream (token appended when the page has one). */
export function streamURL(
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): string {
  const url = URLExt.join(settings.wsUrl, API_PATH, 'stream');
  return settings.token ? `${url}?token=${encodeURIComponent(settings.token)}` : url;
}
