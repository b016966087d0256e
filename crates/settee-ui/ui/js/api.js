// Talks to the server's public HTTP API only (so the UI works against any CouchDB 3 too).
// Every failure becomes an ApiError carrying CouchDB's `error` and `reason`.

export class ApiError extends Error {
  constructor(status, error, reason) {
    super(`${error}: ${reason}`);
    this.status = status;
    this.error = error;
    this.reason = reason;
  }
}

/** A path segment as a URL part (document ids keep `_design/` and `_local/` readable). */
export function enc(segment) {
  for (const prefix of ["_design/", "_local/"]) {
    if (segment.startsWith(prefix)) {
      return prefix + encodeURIComponent(segment.slice(prefix.length));
    }
  }
  return encodeURIComponent(segment);
}

/** A query string from an object, skipping undefined and empty values. */
export function qs(params) {
  const parts = [];
  for (const [k, v] of Object.entries(params || {})) {
    if (v === undefined || v === null || v === "") continue;
    parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  }
  return parts.length ? `?${parts.join("&")}` : "";
}

/**
 * Sends a request; JSON bodies are encoded, answers decoded. `raw: true` gives the
 * Response itself (attachments). Session cookies travel with every request.
 */
export async function api(method, path, { body, headers, raw } = {}) {
  const init = { method, headers: { Accept: "application/json", ...headers }, credentials: "same-origin" };
  if (body !== undefined) {
    if (body instanceof Blob || body instanceof ArrayBuffer || typeof body === "string") {
      init.body = body;
    } else {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, "network_error", `The server could not be reached (${e.message}).`);
  }
  if (raw && resp.ok) return resp;
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch (_) {
    data = text;
  }
  if (!resp.ok) {
    const error = (data && data.error) || `http_${resp.status}`;
    const reason = (data && data.reason) || resp.statusText || "";
    throw new ApiError(resp.status, error, reason);
  }
  return data;
}

export const get = (path) => api("GET", path);
export const put = (path, body) => api("PUT", path, { body });
export const post = (path, body) => api("POST", path, { body });
export const del = (path) => api("DELETE", path);
