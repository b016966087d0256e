// CouchDB's JavaScript environment for design document functions, and the entry points the
// engine calls. Evaluated once per engine; `__log` is provided by the host.
"use strict";

var __rows = null;

function emit(key, value) {
  if (__rows === null) {
    throw new Error("emit() may only be called from a map function");
  }
  __rows.push([key === undefined ? null : key, value === undefined ? null : value]);
}

function sum(values) {
  var total = 0;
  for (var i = 0; i < values.length; i++) {
    total += values[i];
  }
  return total;
}

function toJSON(value) {
  return JSON.stringify(value);
}

function isArray(value) {
  return Array.isArray(value);
}

function log(message) {
  __log(typeof message === "string" ? message : JSON.stringify(message));
}

// Tells the host that a caught exception means the heap ran out (QuickJS throws null when
// it cannot even make the error): whatever filled it may still hold it, so the host replaces
// the engine after the call.
function __note(e) {
  if (e === null || (e instanceof InternalError && /out of memory/.test(e.message))) {
    __exhausted();
  }
}

function __describe(e) {
  __note(e);
  if (e && typeof e === "object" && !(e instanceof Error)) {
    try { return JSON.stringify(e); } catch (_) { /* fall through */ }
  }
  return String(e) + (e && e.stack ? "\n" + e.stack : "");
}

function __fail(error, reason) {
  var e = new Error(reason);
  e.couchError = error;
  return e;
}

// CommonJS `require` over the string members of `root` (paths like "views/lib/util"), as
// CouchDB resolves them: "./" and "../" relative to the requiring module, cached per root.
function __makeRequire(root) {
  var cache = {};
  function resolve(dir, name) {
    if (typeof name !== "string") {
      throw __fail("invalid_require_path", "require() needs a string path");
    }
    var path = name.charAt(0) === "." ? dir.slice() : [];
    var parts = name.split("/");
    for (var i = 0; i < parts.length; i++) {
      var part = parts[i];
      if (part === "..") {
        if (path.length === 0) {
          throw __fail("invalid_require_path", "Object has no parent: " + name);
        }
        path.pop();
      } else if (part !== "." && part !== "") {
        path.push(part);
      }
    }
    return path;
  }
  function load(path) {
    var id = path.join("/");
    if (Object.prototype.hasOwnProperty.call(cache, id)) {
      return cache[id].exports;
    }
    var source = root;
    for (var i = 0; i < path.length; i++) {
      source = source !== null && typeof source === "object" ? source[path[i]] : undefined;
    }
    if (typeof source !== "string") {
      throw __fail("invalid_require_path", "Object has no property \"" + id + "\"");
    }
    var module = { id: id, exports: {} };
    // As in CouchDB, a module required again while it loads (a circular require) gets an
    // empty object of its own, not its exports so far.
    cache[id] = { exports: {} };
    var dir = path.slice(0, -1);
    try {
      var body = new Function("module", "exports", "require", source + "\n");
      body(module, module.exports, function (name) { return load(resolve(dir, name)); });
    } catch (e) {
      delete cache[id];
      throw e;
    }
    cache[id] = module;
    return module.exports;
  }
  return function (name) { return load(resolve([], name)); };
}

// Turns a design document function's source into a function, with `require` in scope.
function __compile(source, require) {
  var text = String(source).replace(/[\s;]+$/, "");
  var fn;
  try {
    fn = new Function("require", "return (" + text + "\n);")(require);
  } catch (e) {
    throw __fail("compilation_error", __describe(e) + " (" + source + ")");
  }
  if (typeof fn !== "function") {
    throw __fail("compilation_error", "Expression does not eval to a function. (" + source + ")");
  }
  return fn;
}

// A batch mapper for the map functions `sources`: given a JSON array of documents, returns
// a JSON array with, per document, per function, the emitted [key, value] pairs. A function
// that throws for a document is logged and emits nothing for it, as in CouchDB.
function __program(sources, lib) {
  var require = __makeRequire({ views: { lib: lib } });
  var fns = sources.map(function (s) { return __compile(s, require); });
  return function (docsText) {
    var docs = JSON.parse(docsText);
    var out = new Array(docs.length);
    for (var i = 0; i < docs.length; i++) {
      var doc = docs[i];
      var per = new Array(fns.length);
      for (var j = 0; j < fns.length; j++) {
        __rows = [];
        try {
          fns[j](doc);
          per[j] = __rows;
        } catch (e) {
          __log("function raised exception " + __describe(e) + " with doc._id " + (doc && doc._id));
          per[j] = [];
        }
      }
      __rows = null;
      // Each document's rows become text at once, as in CouchDB: a function may change an
      // emitted object while mapping a later document.
      try {
        out[i] = JSON.stringify(per);
      } catch (e) {
        __log("emitted values of doc._id " + (doc && doc._id) + " are not JSON: " + __describe(e));
        out[i] = JSON.stringify(fns.map(function () { return []; }));
      }
    }
    return "[" + out.join(",") + "]";
  };
}

// A reducer: given JSON keys (or null when rereducing) and values, returns the JSON result.
// As in CouchDB, a function that throws is logged and reduces to null, unless it threw
// "fatal_error" or ["fatal", error, reason]; a heap that ran out stays an error.
function __reducer(source) {
  var fn = __compile(source, function () {
    throw __fail("invalid_require_path", "require() is not available in reduce functions");
  });
  return function (keysText, valuesText, rereduce) {
    var keys = keysText == null ? null : JSON.parse(keysText);
    var result;
    try {
      result = fn(keys, JSON.parse(valuesText), rereduce);
    } catch (e) {
      __note(e);
      if (e === null || (e instanceof InternalError && /out of memory/.test(e.message))) {
        throw e;
      }
      if (e === "fatal_error") {
        throw __fail("map_runtime_error", "function raised 'fatal_error'");
      }
      if (Array.isArray(e) && e[0] === "fatal") {
        throw __fail(String(e[1]), String(e[2]));
      }
      __log("function raised exception " + __describe(e));
      result = null;
    }
    var text = JSON.stringify(result === undefined ? null : result);
    return text === undefined ? "null" : text;
  };
}

// A batch filter for a `filters` function (`require` over the whole design document):
// given a JSON array of documents and the request object, returns a JSON array of booleans.
// A filter that throws fails the call, as CouchDB fails the feed: with the `error` and
// `reason` it threw, an Error's name and message, or CouchDB's `unknown_error`.
function __filter(source, ddoc) {
  var fn = __compile(source, __makeRequire(ddoc));
  return function (docsText, reqText) {
    var docs = JSON.parse(docsText);
    var req = JSON.parse(reqText);
    var out = new Array(docs.length);
    for (var i = 0; i < docs.length; i++) {
      try {
        out[i] = !!fn(docs[i], req);
      } catch (e) {
        __log("filter raised exception " + __describe(e) + " with doc._id " + (docs[i] && docs[i]._id));
        throw __filterFailure(e);
      }
    }
    return JSON.stringify(out);
  };
}

// `_changes?filter=_view`: a view's map function as a batch filter, passing the documents
// it emits a row for. Unlike in a view, an exception fails the call (and the feed), as
// CouchDB's does.
function __viewFilter(source, ddoc) {
  var fn = __compile(source, __makeRequire({ views: { lib: (ddoc.views || {}).lib } }));
  return function (docsText) {
    var docs = JSON.parse(docsText);
    var out = new Array(docs.length);
    try {
      for (var i = 0; i < docs.length; i++) {
        __rows = [];
        try {
          fn(docs[i]);
        } catch (e) {
          __log("function raised exception " + __describe(e) + " with doc._id " + (docs[i] && docs[i]._id));
          throw __filterFailure(e);
        }
        out[i] = __rows.length > 0;
      }
    } finally {
      __rows = null;
    }
    return JSON.stringify(out);
  };
}

// What a filter's exception fails its feed with (the heap running out stays itself).
function __filterFailure(e) {
  if (e === null || (e instanceof InternalError && /out of memory/.test(e.message))) {
    return e;
  }
  if (e && typeof e.error === "string" && e.reason !== undefined) {
    return __fail(e.error, typeof e.reason === "string" ? e.reason : JSON.stringify(e.reason));
  }
  if (e instanceof Error) {
    return __fail(e.name, e.message);
  }
  return __fail("unknown_error", "unnamed_error");
}

// A `validate_doc_update` function (`require` over the whole design document), called with
// the new document, the old one (or null), the user context and the security object as JSON
// texts. Answers "ok", or the error name and the reason on two lines for a thrown
// `{forbidden: …}`, `{unauthorized: …}` or other value; a thrown Error fails the call itself.
function __validator(source, ddoc) {
  var fn = __compile(source, __makeRequire(ddoc));
  return function (newText, oldText, ctxText, secText) {
    try {
      fn.call(ddoc, JSON.parse(newText), JSON.parse(oldText), JSON.parse(ctxText), JSON.parse(secText));
      return "ok";
    } catch (e) {
      __note(e);
      var text = function (v) { return typeof v === "string" ? v : JSON.stringify(v); };
      if (e && typeof e === "object" && e.forbidden !== undefined) {
        return "forbidden\n" + text(e.forbidden);
      }
      if (e && typeof e === "object" && e.unauthorized !== undefined) {
        return "unauthorized\n" + text(e.unauthorized);
      }
      if (e && e.name && e.stack) {
        throw e;
      }
      return "unknown_error\n" + text(e);
    }
  };
}

// ---- Show, list, update and rewrite functions (CouchDB's "render" functions) ----------

// MIME types by key, as `registerType` and `provides` know them; reset to CouchDB's defaults
// before each call, so no call sees another's registrations.
var __mimesByKey, __keysByMime, __provided, __responseType;
// A list's or show's output: chunks sent and not yet passed on, the start response, rows.
var __chunks, __startResp, __gotRow, __lastRow, __inList;

function registerType() {
  var mimes = Array.prototype.slice.call(arguments);
  var key = mimes.shift();
  __mimesByKey[key] = mimes;
  mimes.forEach(function (m) { __keysByMime[m] = key; });
}

function __resetRender() {
  __mimesByKey = {};
  __keysByMime = {};
  __provided = [];
  __responseType = null;
  __chunks = [];
  __startResp = null;
  __gotRow = false;
  __lastRow = false;
  registerType("all", "*/*");
  registerType("text", "text/plain; charset=utf-8", "txt");
  registerType("html", "text/html; charset=utf-8");
  registerType("xhtml", "application/xhtml+xml", "xhtml");
  registerType("xml", "application/xml", "text/xml", "application/x-xml");
  registerType("js", "text/javascript", "application/javascript", "application/x-javascript");
  registerType("css", "text/css");
  registerType("ics", "text/calendar");
  registerType("csv", "text/csv");
  registerType("rss", "application/rss+xml");
  registerType("atom", "application/atom+xml");
  registerType("yaml", "application/x-yaml", "text/yaml");
  registerType("multipart_form", "multipart/form-data");
  registerType("url_encoded_form", "application/x-www-form-urlencoded");
  registerType("json", "application/json", "text/x-json");
}

function provides(key, fn) {
  __provided.push([key, fn]);
}

function send(chunk) {
  __chunks.push(String(chunk));
}

function start(resp) {
  if (__gotRow) {
    throw ["error", "list_error", "start() must be called before getRow()"];
  }
  __startResp = resp || {};
}

function getRow() {
  if (!__inList) {
    throw ["error", "render_error", "getRow() may only be called from a list function"];
  }
  if (__lastRow) {
    return null;
  }
  if (!__gotRow) {
    __gotRow = true;
    var resp = __withType(__startResp || {}, __responseType);
    if (!__listStart(JSON.stringify(resp), __chunks.join(""))) {
      throw ["fatal", "client_gone", "the client went away"];
    }
  } else if (__chunks.length > 0 && !__listSend(__chunks.join(""))) {
    throw ["fatal", "client_gone", "the client went away"];
  }
  __chunks = [];
  var row = __listNext();
  if (row === null || row === undefined) {
    __lastRow = true;
    return null;
  }
  return JSON.parse(row);
}

function __wrap(resp) {
  return typeof resp === "string" ? { body: resp } : resp;
}

function __withType(resp, type) {
  resp.headers = resp.headers || {};
  if (type && !resp.headers["Content-Type"]) {
    resp.headers["Content-Type"] = type;
  }
  return resp;
}

// An Accept header's media ranges: type, subtype, parameters and quality.
function __mediaRanges(accept) {
  return String(accept).split(",").map(function (part) {
    var params = part.split(";");
    var full = params.shift().trim();
    var range = { params: {}, q: 1 };
    params.forEach(function (p) {
      var kv = p.split("=");
      if (kv.length === 2) {
        range.params[kv[0].trim()] = kv[1].trim();
      }
    });
    if (range.params.q !== undefined) {
      var q = parseFloat(range.params.q);
      range.q = isNaN(q) || q < 0 || q > 1 ? 1 : q;
      delete range.params.q;
    }
    if (full === "*") {
      full = "*/*";
    }
    var ts = full.split("/");
    range.type = ts[0];
    range.subtype = ts[1] || "*";
    return range;
  });
}

// The MIME type of `supported` that fits the Accept header best (mimeparse's rules: the
// most specific matching range decides a type's quality); null when none is acceptable.
function __bestMatch(supported, accept) {
  var ranges = __mediaRanges(accept);
  var best = null;
  supported.forEach(function (mime, pos) {
    var target = __mediaRanges(mime)[0];
    var fitness = -1, q = 0;
    ranges.forEach(function (r) {
      var typeOk = r.type === target.type || r.type === "*" || target.type === "*";
      var subOk = r.subtype === target.subtype || r.subtype === "*" || target.subtype === "*";
      if (!typeOk || !subOk) {
        return;
      }
      var fit = (r.type === target.type ? 100 : 0) + (r.subtype === target.subtype ? 10 : 0);
      for (var k in target.params) {
        if (r.params[k] === target.params[k]) {
          fit += 1;
        }
      }
      if (fit > fitness) {
        fitness = fit;
        q = r.q;
      }
    });
    var better = best === null || fitness > best.fitness || (fitness === best.fitness && q >= best.q);
    if (q > 0 && better) {
      best = { mime: mime, q: q, fitness: fitness };
    }
  });
  return best && best.mime;
}

// Runs the `provides` function the request asks for: `?format=`, else the best match for
// its Accept header, else the first one provided.
function __runProvides(req, ddoc) {
  var key = null;
  var accept = req.headers && (req.headers.Accept || req.headers.accept);
  if (req.query && req.query.format) {
    key = req.query.format;
    __responseType = (__mimesByKey[key] || [])[0] || null;
  } else if (accept) {
    // As CouchDB: the provided types are weighed last first (ties go to the last).
    __provided.reverse();
    var supported = [];
    __provided.forEach(function (p) { supported = supported.concat(__mimesByKey[p[0]] || []); });
    __responseType = __bestMatch(supported, accept);
    key = __responseType && __keysByMime[__responseType];
  } else if (__provided.length > 0) {
    key = __provided[0][0];
    __responseType = (__mimesByKey[key] || [])[0] || null;
  }
  for (var i = 0; i < __provided.length; i++) {
    if (__provided[i][0] === key) {
      return __provided[i][1].call(ddoc);
    }
  }
  var types = __provided.map(function (p) { return (__mimesByKey[p[0]] || []).join(", ") || p[0]; });
  throw ["error", "not_acceptable",
    "Content-Type " + (accept || key) + " not supported, try one of: " + types.join(", ")];
}

// What a render function's exception fails its request with: an `["error", name, reason]`
// or `{error, reason}` as thrown, anything else `render_error`.
function __renderFailure(e) {
  __note(e);
  if (e === null || (e instanceof InternalError && /out of memory/.test(e.message))) {
    return e;
  }
  if (Array.isArray(e) && (e[0] === "error" || e[0] === "fatal") && e.length >= 3) {
    return __fail(String(e[1]), typeof e[2] === "string" ? e[2] : JSON.stringify(e[2]));
  }
  if (e && typeof e === "object" && e.error !== undefined && e.reason !== undefined) {
    return __fail(String(e.error), typeof e.reason === "string" ? e.reason : JSON.stringify(e.reason));
  }
  return __fail("render_error", "function raised error: " + String(e) + " \nstacktrace: " + (e ? e.stack : undefined));
}

// A show function: given the document (or null) and the request as JSON, the response
// object ({code, headers, body | json | base64}) as JSON.
function __show(source, ddoc) {
  var fn = __compile(source, __makeRequire(ddoc));
  return function (docText, reqText) {
    __resetRender();
    var req = JSON.parse(reqText);
    try {
      var resp = __wrap(fn.call(ddoc, JSON.parse(docText), req) || {});
      if (__chunks.length > 0) {
        resp.headers = resp.headers || {};
        for (var h in __startResp) {
          resp.headers[h] = __startResp[h];
        }
        resp.body = __chunks.join("") + (resp.body || "");
        __chunks = [];
      }
      if (__provided.length > 0) {
        var provided = __wrap(__runProvides(req, ddoc) || {});
        resp.body = (resp.body || "") + __chunks.join("") + (provided.body || "");
        resp = __withType(resp, __responseType);
      }
      if (typeof resp !== "object" || resp === null) {
        throw ["error", "render_error", "undefined response from show function"];
      }
      return JSON.stringify(resp);
    } catch (e) {
      throw __renderFailure(e);
    }
  };
}

// An update function: given the document (or null) and the request, `[doc, response]` as
// JSON (doc null when nothing is to be saved).
function __update(source, ddoc) {
  var fn = __compile(source, __makeRequire(ddoc));
  return function (docText, reqText) {
    __resetRender();
    var req = JSON.parse(reqText);
    try {
      if (req.method === "GET") {
        throw ["error", "method_not_allowed", "Update functions do not allow GET"];
      }
      var result = fn.call(ddoc, JSON.parse(docText), req);
      var resp = result && result[1];
      if (typeof resp !== "string" && (typeof resp !== "object" || resp === null)) {
        throw ["error", "render_error", "undefined response from update function"];
      }
      var doc = result[0] === undefined ? null : result[0];
      return JSON.stringify([doc, __wrap(resp)]);
    } catch (e) {
      throw __renderFailure(e);
    }
  };
}

// A list function over the rows the host gives through `__listNext`; what it sends goes out
// through `__listStart` (with the response's code and headers) and `__listSend`. Returns
// the last chunk.
function __list(source, ddoc) {
  var fn = __compile(source, __makeRequire(ddoc));
  return function (headText, reqText) {
    __resetRender();
    __inList = true;
    var req = JSON.parse(reqText);
    try {
      var tail = fn.call(ddoc, JSON.parse(headText), req);
      if (__provided.length > 0) {
        tail = __runProvides(req, ddoc);
      }
      if (!__gotRow) {
        getRow();
      }
      if (tail !== undefined && tail !== null) {
        __chunks.push(String(tail));
      }
      var rest = __chunks.join("");
      __chunks = [];
      return rest;
    } catch (e) {
      throw __renderFailure(e);
    } finally {
      __inList = false;
    }
  };
}

// A rewrite function: given the request, where to send it as JSON (`{path, query, method,
// headers, body}` or `{code, headers, body}` to answer at once), or "null" for no rule.
function __rewriter(source, ddoc) {
  var fn = __compile(source, __makeRequire(ddoc));
  return function (reqText) {
    var req = JSON.parse(reqText);
    var result;
    try {
      result = fn.call(ddoc, req);
    } catch (e) {
      throw __renderFailure(e);
    }
    if (!result) {
      return "null";
    }
    if (typeof result === "string") {
      result = { path: result, method: req.method };
    }
    return JSON.stringify(result);
  };
}

__inList = false;
__resetRender();

// What tells the host how a call went cannot be replaced by the functions it runs.
["__note", "__exhausted", "__describe"].forEach(function (name) {
  Object.defineProperty(globalThis, name, { writable: false, configurable: false });
});

// ---- Search index functions ------------------------------------------------------------

// The fields of the document being indexed, or null outside an index function.
var __fields = null;

// `index(name, value, options)` (search indexes) or `index(type, name, value, options)`
// (nouveau indexes): checks its arguments as CouchDB does and records the field.
function index() {
  if (__fields === null) {
    throw new Error("index() may only be called from an index function");
  }
  var nouveau = __fields.nouveau;
  var a = Array.prototype.slice.call(arguments);
  var type = nouveau ? a.shift() : "auto";
  var name = a[0], value = a[1], options = a[2];
  if (nouveau && typeof type !== "string") {
    throw { name: "TypeError", message: "type must be a string not " + typeof type };
  }
  if (typeof name !== "string") {
    throw { name: "TypeError", message: "name must be a string not " + typeof name };
  }
  if (name.substring(0, 1) === "_") {
    throw { name: "ReservedName", message: "name must not start with an underscore" };
  }
  if (nouveau) {
    __checkNouveauValue(type, value);
  } else if (typeof value !== "string" && typeof value !== "number" && typeof value !== "boolean") {
    throw { name: "TypeError", message: "value must be a string, a number or boolean not " + typeof value };
  }
  if (options !== undefined && options !== null && typeof options !== "object") {
    throw { name: "TypeError", message: "options must be an object not " + typeof options };
  }
  __fields.out.push([type, name, value, options || {}]);
}

function __checkNouveauValue(type, value) {
  var want = { text: "string", string: "string", double: "number" }[type];
  if (type === "stored") {
    if (typeof value !== "string" && typeof value !== "number") {
      throw { name: "TypeError", message: "value must be a string or number not " + typeof value };
    }
  } else if (want === undefined) {
    throw { name: "TypeError", message: type + " not supported" };
  } else if (typeof value !== want) {
    throw { name: "TypeError", message: "value must be a " + want + " not " + typeof value };
  }
}

// A batch indexer for a search (or, with `nouveau`, a nouveau) index function: given a JSON
// array of documents, returns a JSON array with, per document, its fields as
// `[type, name, value, options]`, or the text of the error the function threw (the document
// is then left out of the index, as in CouchDB).
function __searchIndexer(source, ddoc, nouveau) {
  var fn = __compile(source, __makeRequire(ddoc));
  return function (docsText) {
    var docs = JSON.parse(docsText);
    var out = new Array(docs.length);
    for (var i = 0; i < docs.length; i++) {
      __fields = { nouveau: nouveau, out: [] };
      try {
        fn(docs[i]);
        out[i] = __fields.out;
      } catch (e) {
        var text = e && e.name && e.message ? e.name + ": " + e.message : __describe(e);
        __log("index function raised exception " + text + " with doc._id " + (docs[i] && docs[i]._id));
        out[i] = null;
      }
    }
    __fields = null;
    return out;
  };
}
