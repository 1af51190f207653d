// The console's requests: every one carries the admin token in its
// Authorization header, and nowhere else.

// TOKEN_KEY is where the tab keeps the admin token (sessionStorage: it is
// gone when the tab closes).
export const TOKEN_KEY = "trellis.console.adminToken";

// SignedOut is what a request of the session answers once the operator
// signed out meanwhile: its answer must not bring data back.
export class SignedOut extends Error {}

// HTTPError is an answer that is not 2xx, with its problem+json body.
export class HTTPError extends Error {
  constructor(status, problem, retryAfter) {
    super(problemText(status, problem));
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

// problemText is what a problem says: its detail and each invalid field.
function problemText(status, problem) {
  if (!problem || typeof problem !== "object") return "the server answered " + status;
  let text = problem.detail || problem.title || "the server answered " + status;
  for (const f of problem.errors || []) text += "; " + f.field + " " + f.message;
  return text;
}

// request sends one authorized request and returns its JSON body (null
// for a 204), with candidate as the token or, by default, the session's,
// and body (when given) as its JSON body.
export async function request(method, url, candidate, body) {
  const token = candidate || sessionStorage.getItem(TOKEN_KEY);
  if (!token) throw new SignedOut("signed out");
  let resp;
  try {
    const headers = { Authorization: "Bearer " + token, Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    resp = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
    });
  } catch (e) {
    throw new Error("cannot reach the server (" + e.message + ")");
  }
  const type = resp.headers.get("Content-Type") || "";
  const answer = resp.status !== 204 && type.includes("json") ? await resp.json().catch(() => null) : null;
  // Checked after the last await: an answer that arrives once the operator
  // signed out must not bring data back into the page.
  if (!candidate && sessionStorage.getItem(TOKEN_KEY) !== token) throw new SignedOut("signed out");
  if (resp.status === 204) return null;
  if (!resp.ok) throw new HTTPError(resp.status, answer, resp.headers.get("Retry-After"));
  return answer;
}
