//! One JavaScript engine: a QuickJS runtime with CouchDB's environment loaded, the compiled
//! programs it has been asked for, and the time and memory limits every call runs under.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rquickjs::function::Func;
use rquickjs::{Context, Ctx, Function, Persistent, Runtime, Value};

use crate::error::{Error, Result};

const PRELUDE: &str = include_str!("prelude.js");

/// Programs kept compiled per engine before the cache is cleared.
const MAX_PROGRAMS: usize = 256;

/// Bounds on what one call may consume (CouchDB's `os_process_timeout` and a heap limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest one call (one batch of documents, one reduce) may run.
    pub timeout: Duration,
    /// Most heap the engine may hold, in bytes.
    pub memory: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            timeout: Duration::from_millis(5000),
            memory: 256 << 20,
        }
    }
}

/// Where a list function's rows come from and its output goes, while it runs.
pub trait ListIo {
    /// The next row's JSON; `None` after the last.
    fn next_row(&mut self) -> Option<String>;
    /// The response's start: its `{"code", "headers"}` as JSON, and what was sent before
    /// the first row was asked for. False when the client has gone.
    fn start(&mut self, resp_json: String, chunk: String) -> bool;
    /// Output sent after the start. False when the client has gone.
    fn send(&mut self, chunk: String) -> bool;
}

/// The list function running now's rows and output.
type ListSlot = Rc<RefCell<Option<Box<dyn ListIo>>>>;

/// Design-document functions that answer requests, by the prelude's maker for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Render {
    /// `shows`: `(doc, req)` to a response.
    Show,
    /// `lists`: `(head, req)` over rows to chunks.
    List,
    /// `updates`: `(doc, req)` to `[doc, response]`.
    Update,
    /// `rewrites` as a function: `(req)` to a path or a response.
    Rewrite,
}

impl Render {
    fn maker(self) -> &'static str {
        match self {
            Render::Show => "__show",
            Render::List => "__list",
            Render::Update => "__update",
            Render::Rewrite => "__rewriter",
        }
    }
}

/// A QuickJS runtime with CouchDB's JavaScript environment. Not `Send`: each thread that
/// runs JavaScript owns its engines.
pub struct Engine {
    /// Kept alive for the context; dropped after it.
    runtime: Runtime,
    context: Context,
    deadline: Rc<Cell<Option<Instant>>>,
    limits: Limits,
    programs: HashMap<String, Persistent<Function<'static>>>,
    /// A call failed: whatever it left behind (globals grown until memory ran out, a heap
    /// at its limit, a half-run module) could break the calls after it, so whoever holds
    /// the engine replaces it with a fresh one before its next call.
    spent: bool,
    /// Set by the environment when a function's exception, caught there, was the heap
    /// running out: the call succeeded, but the engine is spent all the same.
    exhausted: Rc<Cell<bool>>,
    /// The rows and output of the list function running now.
    list: ListSlot,
}

impl Engine {
    /// A fresh engine with the environment loaded.
    pub fn new(limits: Limits) -> Result<Engine> {
        let runtime = Runtime::new().map_err(engine_error)?;
        runtime.set_max_stack_size(1 << 20);
        let deadline: Rc<Cell<Option<Instant>>> = Rc::new(Cell::new(None));
        let exhausted = Rc::new(Cell::new(false));
        let list: ListSlot = Rc::new(RefCell::new(None));
        let watch = deadline.clone();
        runtime.set_interrupt_handler(Some(Box::new(move || {
            watch.get().is_some_and(|d| Instant::now() >= d)
        })));
        let context = Context::full(&runtime).map_err(engine_error)?;
        context.with(|ctx| -> Result<()> {
            let log =
                Func::from(|message: String| tracing::info!(target: "settee_js", "{message}"));
            ctx.globals().set("__log", log).map_err(engine_error)?;
            let flag = exhausted.clone();
            ctx.globals()
                .set("__exhausted", Func::from(move || flag.set(true)))
                .map_err(engine_error)?;
            set_list_functions(&ctx, &list)?;
            ctx.eval::<(), _>(PRELUDE).map_err(|e| caught(&ctx, e))
        })?;
        let mut engine = Engine {
            runtime,
            context,
            deadline,
            limits,
            programs: HashMap::new(),
            spent: false,
            exhausted,
            list,
        };
        engine.set_limits(limits);
        Ok(engine)
    }

    /// Whether a call has failed since the engine was made: it should then be replaced by a
    /// fresh one, so that no failure, however it happened, reaches later calls.
    pub fn is_spent(&self) -> bool {
        self.spent
    }

    /// Changes the limits for later calls.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
        self.runtime.set_memory_limit(limits.memory);
    }

    /// Compiles the map functions `sources` (with `lib`, the JSON of the design document's
    /// `views.lib`, for `require`) under `key`, unless a program with that key exists.
    pub fn load_map(&mut self, key: &str, sources: &[&str], lib_json: &str) -> Result<()> {
        if self.programs.contains_key(key) {
            return Ok(());
        }
        let sources: Vec<String> = sources.iter().map(|s| s.to_string()).collect();
        let lib = lib_json.to_string();
        self.compile(key, move |ctx| {
            let make: Function = ctx.globals().get("__program")?;
            let lib: Value = ctx.json_parse(lib)?;
            make.call((sources, lib))
        })
    }

    /// Compiles a `filters` function under `key`, with `require` over the design document
    /// `ddoc_json`, unless a program with that key exists.
    pub fn load_filter(&mut self, key: &str, source: &str, ddoc_json: &str) -> Result<()> {
        self.load_ddoc_function(key, "__filter", source, ddoc_json)
    }

    /// Compiles the map function `source` of design document `ddoc_json` as a filter under
    /// `key` (`_changes?filter=_view`): run with [`Engine::filter_docs`], it passes the
    /// documents the function emits a row for, and fails when the function throws.
    pub fn load_view_filter(&mut self, key: &str, source: &str, ddoc_json: &str) -> Result<()> {
        self.load_ddoc_function(key, "__viewFilter", source, ddoc_json)
    }

    /// Compiles a search index function `source` of design document `ddoc_json` under `key`
    /// (`nouveau` for `index(type, name, value, options)`), unless a program with that key
    /// exists. Run it with [`Engine::index_docs`].
    pub fn load_indexer(
        &mut self,
        key: &str,
        source: &str,
        ddoc_json: &str,
        nouveau: bool,
    ) -> Result<()> {
        if self.programs.contains_key(key) {
            return Ok(());
        }
        let (source, ddoc) = (source.to_string(), ddoc_json.to_string());
        self.compile(key, move |ctx| {
            let make: Function = ctx.globals().get("__searchIndexer")?;
            let ddoc: Value = ctx.json_parse(ddoc)?;
            make.call((source, ddoc, nouveau))
        })
    }

    /// Runs a loaded index function over a JSON array of documents: per document, its
    /// `[type, name, value, options]` fields, or `None` when the function threw (logged).
    /// The fields come back as values, not JSON text: quoting every indexed text in the
    /// engine and parsing it again here was a sixth of an index build.
    pub fn index_docs(
        &mut self,
        key: &str,
        docs_json: String,
    ) -> Result<Vec<Option<Vec<serde_json::Value>>>> {
        self.call(key, move |ctx, f| {
            let out: rquickjs::Array = f.call((docs_json,)).map_err(|e| caught(ctx, e))?;
            let mut docs = Vec::with_capacity(out.len());
            for item in out.iter::<Value>() {
                let item = item.map_err(engine_error)?;
                let Some(fields) = item.as_array() else {
                    docs.push(None);
                    continue;
                };
                let mut got = Vec::with_capacity(fields.len());
                for field in fields.iter::<rquickjs::Array>() {
                    let field = field.map_err(engine_error)?;
                    let part = |i: usize| field.get::<Value>(i).map_err(engine_error);
                    got.push(serde_json::Value::Array(vec![
                        plain(ctx, part(0)?)?,
                        plain(ctx, part(1)?)?,
                        plain(ctx, part(2)?)?,
                        plain(ctx, part(3)?)?,
                    ]));
                }
                docs.push(Some(got));
            }
            Ok(docs)
        })
    }

    /// Compiles `source` under `key` with the prelude's `maker` (which takes the source and
    /// the design document), unless a program with that key exists.
    fn load_ddoc_function(
        &mut self,
        key: &str,
        maker: &'static str,
        source: &str,
        ddoc_json: &str,
    ) -> Result<()> {
        if self.programs.contains_key(key) {
            return Ok(());
        }
        let (source, ddoc) = (source.to_string(), ddoc_json.to_string());
        self.compile(key, move |ctx| {
            let make: Function = ctx.globals().get(maker)?;
            let ddoc: Value = ctx.json_parse(ddoc)?;
            make.call((source, ddoc))
        })
    }

    /// Runs a loaded filter over a JSON array of documents with the request object
    /// `req_json`; one answer per document.
    pub fn filter_docs(
        &mut self,
        key: &str,
        docs_json: String,
        req_json: String,
    ) -> Result<Vec<bool>> {
        let out = self.call(key, move |ctx, f| {
            f.call::<_, String>((docs_json, req_json))
                .map_err(|e| caught(ctx, e))
        })?;
        let bools: Vec<bool> = out
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s == "true")
            .collect();
        Ok(bools)
    }

    /// Compiles a `validate_doc_update` function under `key`, with `require` over the design
    /// document `ddoc_json` (also its `this`), unless a program with that key exists.
    pub fn load_validator(&mut self, key: &str, source: &str, ddoc_json: &str) -> Result<()> {
        self.load_ddoc_function(key, "__validator", source, ddoc_json)
    }

    /// Runs a loaded validation function: `Ok(None)` when it accepts the write, else the
    /// `(error, reason)` it threw (`forbidden`, `unauthorized`, or `unknown_error` for other
    /// thrown values). Arguments are JSON texts.
    pub fn validate(
        &mut self,
        key: &str,
        new_doc: String,
        old_doc: String,
        user_ctx: String,
        sec_obj: String,
    ) -> Result<Option<(String, String)>> {
        let out = self.call(key, move |ctx, f| {
            f.call::<_, String>((new_doc, old_doc, user_ctx, sec_obj))
                .map_err(|e| caught(ctx, e))
        })?;
        if out == "ok" {
            return Ok(None);
        }
        let (error, reason) = out
            .split_once('\n')
            .ok_or_else(|| Error::Engine(format!("unexpected validation answer: {out}")))?;
        Ok(Some((error.to_string(), reason.to_string())))
    }

    /// Compiles a show, list, update or rewrite function of the design document `ddoc_json`
    /// under `key`, unless a program with that key exists.
    pub fn load_render(
        &mut self,
        key: &str,
        kind: Render,
        source: &str,
        ddoc_json: &str,
    ) -> Result<()> {
        self.load_ddoc_function(key, kind.maker(), source, ddoc_json)
    }

    /// Runs a loaded show, update or rewrite function with JSON-text arguments; its answer
    /// as JSON text (see the prelude's `__show`, `__update`, `__rewriter`).
    pub fn render(&mut self, key: &str, args: Vec<String>) -> Result<String> {
        self.call(key, move |ctx, f| {
            let args = rquickjs::function::Rest(args);
            f.call::<_, String>((args,)).map_err(|e| caught(ctx, e))
        })
    }

    /// Runs a loaded list function with the view's `head` and the request, its rows read
    /// from and its output written to `io`; answers the last chunk, and gives `io` back.
    pub fn list(
        &mut self,
        key: &str,
        head: String,
        req: String,
        io: Box<dyn ListIo>,
    ) -> (Result<String>, Box<dyn ListIo>) {
        *self.list.borrow_mut() = Some(io);
        let out = self.call(key, move |ctx, f| {
            f.call::<_, String>((head, req)).map_err(|e| caught(ctx, e))
        });
        let io = self.list.borrow_mut().take().expect("the list's io");
        (out, io)
    }

    /// Compiles a reduce function under its own source text as key.
    pub fn load_reduce(&mut self, source: &str) -> Result<()> {
        if self.programs.contains_key(source) {
            return Ok(());
        }
        let text = source.to_string();
        self.compile(source, move |ctx| {
            let make: Function = ctx.globals().get("__reducer")?;
            make.call((text,))
        })
    }

    fn compile<F>(&mut self, key: &str, make: F) -> Result<()>
    where
        F: for<'js> FnOnce(&Ctx<'js>) -> rquickjs::Result<Function<'js>>,
    {
        if self.programs.len() >= MAX_PROGRAMS {
            self.programs.clear();
        }
        self.deadline
            .set(Some(Instant::now() + self.limits.timeout));
        let saved = self.context.with(|ctx| {
            make(&ctx)
                .map(|f| Persistent::save(&ctx, f))
                .map_err(|e| caught(&ctx, e))
        });
        let program = self.finish_call(saved)?;
        self.programs.insert(key.to_string(), program);
        Ok(())
    }

    /// Runs a loaded map program over a JSON array of documents; returns, per document, per
    /// map function, the emitted `[key, value]` pairs, as JSON text.
    pub fn map_docs(&mut self, key: &str, docs_json: String) -> Result<String> {
        self.call(key, move |ctx, f| {
            f.call::<_, String>((docs_json,))
                .map_err(|e| caught(ctx, e))
        })
    }

    /// Runs a loaded reduce function: `keys_json` is the JSON array of `[key, id]` pairs, or
    /// `None` (the function gets null) when rereducing or when it never reads its keys.
    /// Returns the result as JSON text.
    pub fn reduce(
        &mut self,
        source: &str,
        keys_json: Option<String>,
        values_json: String,
        rereduce: bool,
    ) -> Result<String> {
        self.call(source, move |ctx, f| {
            f.call::<_, String>((keys_json, values_json, rereduce))
                .map_err(|e| caught(ctx, e))
        })
    }

    fn call<R>(
        &mut self,
        key: &str,
        run: impl for<'js> FnOnce(&Ctx<'js>, Function<'js>) -> Result<R>,
    ) -> Result<R> {
        let program = self
            .programs
            .get(key)
            .cloned()
            .ok_or_else(|| Error::Engine(format!("no program {key:?} loaded")))?;
        self.deadline
            .set(Some(Instant::now() + self.limits.timeout));
        let out = self.context.with(|ctx| {
            let f = program.restore(&ctx).map_err(engine_error)?;
            run(&ctx, f)
        });
        self.finish_call(out)
    }

    /// Clears the deadline; a failure after it passed is reported as the timeout it was.
    fn finish_call<R>(&mut self, out: Result<R>) -> Result<R> {
        let expired = self.deadline.get().is_some_and(|d| Instant::now() >= d);
        self.deadline.set(None);
        self.spent |= out.is_err() || self.exhausted.get();
        match out {
            Err(_) if expired => Err(Error::Timeout(self.limits.timeout)),
            other => other,
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Persistent handles must be released before their runtime.
        self.programs.clear();
    }
}

/// The host side of `getRow`, `send` and the start of a list's response.
fn set_list_functions(ctx: &Ctx<'_>, list: &ListSlot) -> Result<()> {
    let globals = ctx.globals();
    let slot = list.clone();
    let next = Func::from(move || slot.borrow_mut().as_mut().and_then(|io| io.next_row()));
    globals.set("__listNext", next).map_err(engine_error)?;
    let slot = list.clone();
    let start = Func::from(move |resp: String, chunk: String| {
        slot.borrow_mut()
            .as_mut()
            .is_some_and(|io| io.start(resp, chunk))
    });
    globals.set("__listStart", start).map_err(engine_error)?;
    let slot = list.clone();
    let send = Func::from(move |chunk: String| {
        slot.borrow_mut().as_mut().is_some_and(|io| io.send(chunk))
    });
    globals.set("__listSend", send).map_err(engine_error)
}

/// A JavaScript value as JSON: strings, numbers and booleans directly, anything else
/// through `JSON.stringify`.
fn plain<'js>(ctx: &Ctx<'js>, v: Value<'js>) -> Result<serde_json::Value> {
    if let Some(s) = v.as_string() {
        return Ok(serde_json::Value::String(
            s.to_string().map_err(engine_error)?,
        ));
    }
    if let Some(i) = v.as_int() {
        return Ok(serde_json::Value::from(i));
    }
    if let Some(x) = v.as_float() {
        // Whole numbers as integers, as `JSON.stringify` writes them.
        if x.fract() == 0.0 && x.abs() < 9.007_199_254_740_992e15 {
            return Ok(serde_json::Value::from(x as i64));
        }
        return Ok(serde_json::Number::from_f64(x).map_or(serde_json::Value::Null, Into::into));
    }
    if let Some(b) = v.as_bool() {
        return Ok(serde_json::Value::Bool(b));
    }
    let text = ctx.json_stringify(v).map_err(engine_error)?;
    match text {
        Some(t) => {
            let t = t.to_string().map_err(engine_error)?;
            Ok(serde_json::from_str(&t).unwrap_or(serde_json::Value::Null))
        }
        None => Ok(serde_json::Value::Null),
    }
}

fn engine_error(e: rquickjs::Error) -> Error {
    Error::Engine(e.to_string())
}

/// Turns a failed call into an error, taking the pending exception's message and, for
/// errors raised by the environment, their CouchDB error name.
fn caught(ctx: &Ctx<'_>, e: rquickjs::Error) -> Error {
    if !e.is_exception() {
        return engine_error(e);
    }
    let exception = ctx.catch();
    // QuickJS throws null when it cannot even make the out-of-memory error.
    if exception.is_null() {
        return Error::OutOfMemory;
    }
    let text = |name: &str| -> Option<String> {
        exception
            .as_object()?
            .get::<_, Option<String>>(name)
            .ok()
            .flatten()
    };
    let message = text("message").or_else(|| {
        ctx.json_stringify(exception.clone())
            .ok()
            .flatten()
            .and_then(|s| s.to_string().ok())
    });
    let message = message.unwrap_or_else(|| "an exception".to_string());
    match text("couchError").as_deref() {
        Some("compilation_error") => Error::Compile(message),
        Some(other) => Error::Raised {
            error: other.to_string(),
            reason: message,
        },
        None if message.contains("out of memory") => Error::OutOfMemory,
        // CouchDB's query server names an exception by its `name` (`Error`, `TypeError`,
        // ...), and anything else thrown `unnamed_error`.
        None => Error::Raised {
            error: text("name").unwrap_or_else(|| "unnamed_error".to_string()),
            reason: message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> Engine {
        Engine::new(Limits::default()).expect("an engine")
    }

    fn rows(e: &mut Engine, sources: &[&str], lib: &str, docs: &str) -> serde_json::Value {
        let key = format!("{sources:?}{lib}");
        e.load_map(&key, sources, lib).expect("compiles");
        serde_json::from_str(&e.map_docs(&key, docs.to_string()).expect("maps")).expect("JSON out")
    }

    #[test]
    fn index_functions_give_their_fields_as_values() {
        let mut e = engine();
        let source = "function(doc) { if (doc.bad) throw new Error('no'); \
            index('default', doc.t); index('n', doc.n, {store: true}); \
            index('f', 1.5); index('b', true); }";
        e.load_indexer("k", source, "{}", false).expect("compiles");
        let docs = r#"[{"t":"a \"quoted\" text","n":280},{"bad":true},{"t":"x","n":-0.0}]"#;
        let out = e.index_docs("k", docs.to_string()).expect("runs");
        assert_eq!(out.len(), 3);
        let first = out[0].as_ref().expect("fields");
        assert_eq!(
            first,
            &vec![
                serde_json::json!(["auto", "default", "a \"quoted\" text", {}]),
                serde_json::json!(["auto", "n", 280, {"store": true}]),
                serde_json::json!(["auto", "f", 1.5, {}]),
                serde_json::json!(["auto", "b", true, {}]),
            ]
        );
        assert!(out[1].is_none(), "a document whose function threw");
        assert_eq!(out[2].as_ref().expect("fields")[1][2], serde_json::json!(0));
    }

    #[test]
    fn maps_emit_rows_per_document_per_function() {
        let mut e = engine();
        let out = rows(
            &mut e,
            &[
                "function(doc) { emit(doc._id, doc.n); }",
                "function (doc) { if (doc.n > 1) { emit([doc.n, 'x'], null); emit(doc.n); } };",
            ],
            "null",
            r#"[{"_id":"a","n":1},{"_id":"b","n":2}]"#,
        );
        assert_eq!(
            out,
            serde_json::json!([
                [[["a", 1]], []],
                [[["b", 2]], [[[2, "x"], null], [2, null]]]
            ])
        );
    }

    #[test]
    fn a_throwing_function_skips_only_that_document() {
        let mut e = engine();
        let out = rows(
            &mut e,
            &["function(doc) { emit(doc.a.b, 1); }"],
            "null",
            r#"[{"a":{"b":"x"}},{},{"a":{"b":"y"}}]"#,
        );
        assert_eq!(out, serde_json::json!([[[["x", 1]]], [[]], [[["y", 1]]]]));
    }

    #[test]
    fn a_document_emitting_what_json_cannot_hold_skips_only_that_document() {
        let mut e = engine();
        let out = rows(
            &mut e,
            &["function(doc) { var v = {n: doc.n}; if (doc.cyclic) { v.self = v; } emit(doc.n, v); }", "function(doc) { emit('second', doc.n); }"],
            "null",
            r#"[{"n":1},{"n":2,"cyclic":true},{"n":3}]"#,
        );
        let expected = serde_json::json!([
            [[[1, {"n": 1}]], [["second", 1]]],
            [[], []],
            [[[3, {"n": 3}]], [["second", 3]]],
        ]);
        assert_eq!(out, expected);
    }

    #[test]
    fn each_document_keeps_what_it_emitted_though_the_object_changes_later() {
        let mut e = engine();
        let lib = r#"{"state": "exports.seen = {n: 0};"}"#;
        let out = rows(&mut e, &["function(doc) { var s = require('views/lib/state').seen; s.n += 1; emit(doc._id, s); }"], lib, r#"[{"_id":"a"},{"_id":"b"}]"#);
        assert_eq!(
            out,
            serde_json::json!([[[["a", {"n": 1}]]], [[["b", {"n": 2}]]]])
        );
    }

    #[test]
    fn environment_helpers_behave_as_couchdb() {
        let mut e = engine();
        let out = rows(
            &mut e,
            &["function(doc) { log('indexing ' + doc._id); emit(sum([1, 2, 3.5]), [toJSON({a: 1}), isArray([]), isArray({})]); }"],
            "null",
            r#"[{"_id":"x"}]"#,
        );
        assert_eq!(
            out,
            serde_json::json!([[[[6.5, ["{\"a\":1}", true, false]]]]])
        );
    }

    #[test]
    fn require_loads_commonjs_modules_from_views_lib() {
        let mut e = engine();
        let lib = r#"{"math": "exports.twice = function (x) { return 2 * require('./const').k * x; };", "const": "module.exports = {k: 1};"}"#;
        let out = rows(
            &mut e,
            &["function(doc) { emit(require('views/lib/math').twice(doc.n), null); }"],
            lib,
            r#"[{"n":4}]"#,
        );
        assert_eq!(out, serde_json::json!([[[[8, null]]]]));
        let out = rows(
            &mut e,
            &["function(doc) { require('views/lib/nothing'); emit(1, 1); }"],
            lib,
            r#"[{"n":4}]"#,
        );
        assert_eq!(
            out,
            serde_json::json!([[[]]]),
            "a missing module fails that document only"
        );
    }

    #[test]
    fn validators_accept_refuse_and_fail() {
        let mut e = Engine::new(Limits::default()).unwrap();
        let src = "function(newDoc, oldDoc, userCtx, secObj) {
            if (newDoc.bad) throw({forbidden: 'no bad docs for ' + userCtx.name});
            if (!userCtx.name) throw({unauthorized: 'log in'});
            if (oldDoc && oldDoc.locked) throw('locked\\nreally');
            if (newDoc.boom) throw new Error('boom');
            if (secObj.admins && newDoc.who !== this._id) throw({forbidden: 'this is the ddoc'});
        }";
        e.load_validator("v", src, r#"{"_id":"_design/v"}"#)
            .unwrap();
        let run = |e: &mut Engine, new: &str, old: &str, ctx: &str| {
            e.validate(
                "v",
                new.into(),
                old.into(),
                ctx.into(),
                r#"{"admins":{}}"#.into(),
            )
        };
        assert_eq!(
            run(
                &mut e,
                r#"{"who":"_design/v"}"#,
                "null",
                r#"{"name":"ann"}"#
            )
            .unwrap(),
            None
        );
        assert_eq!(
            run(&mut e, r#"{"bad":1}"#, "null", r#"{"name":"ann"}"#).unwrap(),
            Some(("forbidden".into(), "no bad docs for ann".into()))
        );
        assert_eq!(
            run(&mut e, "{}", "null", r#"{"name":null}"#).unwrap(),
            Some(("unauthorized".into(), "log in".into()))
        );
        assert_eq!(
            run(&mut e, "{}", r#"{"locked":true}"#, r#"{"name":"a"}"#).unwrap(),
            Some(("unknown_error".into(), "locked\nreally".into()))
        );
        assert!(
            run(&mut e, r#"{"boom":1}"#, "null", r#"{"name":"a"}"#).is_err(),
            "a thrown Error fails the call"
        );
        assert_eq!(
            run(&mut e, r#"{"who":"x"}"#, "null", r#"{"name":"a"}"#).unwrap(),
            Some(("forbidden".into(), "this is the ddoc".into()))
        );
    }

    #[test]
    fn filters_see_documents_and_the_request() {
        let mut e = engine();
        let ddoc = r#"{"lib": {"odd": "exports.odd = function (n) { return n % 2 == 1; };"}}"#;
        e.load_filter("f", "function(doc, req) { return require('lib/odd').odd(doc.n) && doc.kind == req.query.kind; }", ddoc).unwrap();
        let out = e.filter_docs(
            "f",
            r#"[{"n":1,"kind":"a"},{"n":2,"kind":"a"},{"n":3,"kind":"b"},{}]"#.into(),
            r#"{"query":{"kind":"a"}}"#.into(),
        );
        assert_eq!(out.unwrap(), [true, false, false, false]);
    }

    #[test]
    fn compilation_errors_are_reported() {
        let mut e = engine();
        assert!(matches!(
            e.load_map("bad", &["function(doc) { emit("], "null"),
            Err(Error::Compile(_))
        ));
        assert!(
            matches!(e.load_map("num", &["42"], "null"), Err(Error::Compile(m)) if m.contains("does not eval to a function"))
        );
        assert!(matches!(
            e.load_reduce("function(k, v) {"),
            Err(Error::Compile(_))
        ));
    }

    #[test]
    fn reduce_and_rereduce() {
        let mut e = engine();
        let src = "function(keys, values, rereduce) { return rereduce ? sum(values) * 10 : keys.length + sum(values); }";
        e.load_reduce(src).unwrap();
        assert_eq!(
            e.reduce(
                src,
                Some(r#"[[1,"a"],[2,"b"]]"#.into()),
                "[5,6]".into(),
                false
            )
            .unwrap(),
            "13"
        );
        assert_eq!(e.reduce(src, None, "[1,2]".into(), true).unwrap(), "30");
        // A reduce that throws reduces to null, as in CouchDB, unless it throws fatally.
        let throws = "function() { throw {error: 'bad', reason: 'no'}; }";
        e.load_reduce(throws).unwrap();
        assert_eq!(e.reduce(throws, None, "[]".into(), true).unwrap(), "null");
        let fatal = "function() { throw 'fatal_error'; }";
        e.load_reduce(fatal).unwrap();
        assert!(matches!(
            e.reduce(fatal, None, "[]".into(), true),
            Err(Error::Raised { error, .. }) if error == "map_runtime_error"
        ));
        let fatal = "function() { throw ['fatal', 'mine', 'why']; }";
        e.load_reduce(fatal).unwrap();
        assert!(matches!(
            e.reduce(fatal, None, "[]".into(), true),
            Err(Error::Raised { error, reason }) if error == "mine" && reason == "why"
        ));
    }

    #[test]
    fn a_runaway_function_is_stopped_and_the_engine_stays_usable() {
        let mut e = Engine::new(Limits {
            timeout: Duration::from_millis(200),
            ..Limits::default()
        })
        .unwrap();
        e.load_map("loop", &["function(doc) { while (true) {} }"], "null")
            .unwrap();
        let started = Instant::now();
        assert!(matches!(
            e.map_docs("loop", "[{}]".into()),
            Err(Error::Timeout(_))
        ));
        assert!(started.elapsed() < Duration::from_secs(5));
        let out = rows(&mut e, &["function(doc) { emit(1, 2); }"], "null", "[{}]");
        assert_eq!(out, serde_json::json!([[[[1, 2]]]]));
    }

    #[test]
    fn memory_is_bounded() {
        let mut e = Engine::new(Limits {
            memory: 32 << 20,
            ..Limits::default()
        })
        .unwrap();
        let out = rows(
            &mut e,
            &["function(doc) { var a = []; while (true) { a.push(new Array(100000).fill(1)); } }"],
            "null",
            "[{}]",
        );
        assert_eq!(out, serde_json::json!([[[]]]), "the document is skipped");
        let out = rows(
            &mut e,
            &["function(doc) { emit('ok', null); }"],
            "null",
            "[{}]",
        );
        assert_eq!(out, serde_json::json!([[[["ok", null]]]]));
    }

    #[test]
    fn no_host_access_from_javascript() {
        let mut e = engine();
        let out = rows(
            &mut e,
            &["function(doc) { emit([typeof require('fs' ) === 'undefined'], null); }", "function(doc) { emit([typeof std, typeof os, typeof process, typeof fetch], null); }"],
            "null",
            "[{}]",
        );
        assert_eq!(
            out,
            serde_json::json!([[
                [],
                [[["undefined", "undefined", "undefined", "undefined"], null]]
            ]])
        );
    }

    #[test]
    fn shows_answer_with_bodies_json_and_negotiated_types() {
        let mut e = engine();
        let ddoc = r#"{"_id":"_design/d","greeting":"hi"}"#;
        let src = "function(doc, req) { if (req.query.json) return {json: {id: doc && doc._id}}; provides('html', function() { return '<b>' + this.greeting + '</b>'; }); provides('json', function() { send('{\"a\":'); return {body: '1}'}; }); }";
        e.load_render("s", Render::Show, src, ddoc).unwrap();
        let run = |e: &mut Engine, doc: &str, req: serde_json::Value| -> serde_json::Value {
            serde_json::from_str(&e.render("s", vec![doc.into(), req.to_string()]).unwrap())
                .unwrap()
        };
        let json = run(
            &mut e,
            r#"{"_id":"x"}"#,
            serde_json::json!({"query": {"json": "1"}, "headers": {}}),
        );
        assert_eq!(json, serde_json::json!({"json": {"id": "x"}}));
        let html = run(
            &mut e,
            "null",
            serde_json::json!({"query": {}, "headers": {"Accept": "text/html,*/*;q=0.1"}}),
        );
        assert_eq!(html["body"], "<b>hi</b>");
        assert_eq!(html["headers"]["Content-Type"], "text/html; charset=utf-8");
        let by_format = run(
            &mut e,
            "null",
            serde_json::json!({"query": {"format": "json"}, "headers": {}}),
        );
        assert_eq!(by_format["body"], "{\"a\":1}");
        assert_eq!(by_format["headers"]["Content-Type"], "application/json");
        let first = run(
            &mut e,
            "null",
            serde_json::json!({"query": {}, "headers": {}}),
        );
        assert_eq!(first["body"], "<b>hi</b>", "no Accept: the first provided");
        let refused = e.render(
            "s",
            vec![
                "null".into(),
                serde_json::json!({"query": {}, "headers": {"Accept": "image/png"}}).to_string(),
            ],
        );
        assert!(
            matches!(refused, Err(Error::Raised { error, reason }) if error == "not_acceptable" && reason.contains("try one of: application/json, text/x-json, text/html"))
        );
    }

    #[test]
    fn updates_return_a_document_and_a_response() {
        let mut e = engine();
        let src = "function(doc, req) { if (req.query.fail) throw({error: 'nope', reason: 'said no'}); if (!doc) return [{_id: req.uuid, made: true}, 'made']; doc.n = (doc.n || 0) + 1; return [doc, {code: 202, json: {n: doc.n}}]; }";
        e.load_render("u", Render::Update, src, "{}").unwrap();
        let run = |e: &mut Engine, doc: &str, req: serde_json::Value| {
            e.render("u", vec![doc.into(), req.to_string()])
        };
        let made: serde_json::Value = serde_json::from_str(
            &run(
                &mut e,
                "null",
                serde_json::json!({"method": "POST", "uuid": "u1", "query": {}}),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            made,
            serde_json::json!([{"_id": "u1", "made": true}, {"body": "made"}])
        );
        let bumped: serde_json::Value = serde_json::from_str(
            &run(
                &mut e,
                r#"{"_id":"a","n":2}"#,
                serde_json::json!({"method": "PUT", "query": {}}),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            bumped,
            serde_json::json!([{"_id": "a", "n": 3}, {"code": 202, "json": {"n": 3}}])
        );
        assert!(
            matches!(run(&mut e, "null", serde_json::json!({"method": "POST", "query": {"fail": "1"}})), Err(Error::Raised { error, reason }) if error == "nope" && reason == "said no")
        );
        assert!(
            matches!(run(&mut e, "null", serde_json::json!({"method": "GET", "query": {}})), Err(Error::Raised { error, .. }) if error == "method_not_allowed")
        );
        e.load_render(
            "bad",
            Render::Update,
            "function(doc, req) { return [null]; }",
            "{}",
        )
        .unwrap();
        assert!(
            matches!(e.render("bad", vec!["null".into(), r#"{"method":"POST"}"#.into()]), Err(Error::Raised { error, reason }) if error == "render_error" && reason == "undefined response from update function")
        );
    }

    struct Rows {
        rows: Vec<String>,
        out: Rc<RefCell<Vec<String>>>,
    }

    impl ListIo for Rows {
        fn next_row(&mut self) -> Option<String> {
            (!self.rows.is_empty()).then(|| self.rows.remove(0))
        }
        fn start(&mut self, resp: String, chunk: String) -> bool {
            self.out.borrow_mut().push(format!("start {resp} {chunk}"));
            true
        }
        fn send(&mut self, chunk: String) -> bool {
            self.out.borrow_mut().push(chunk);
            true
        }
    }

    #[test]
    fn lists_read_rows_and_stream_chunks() {
        let mut e = engine();
        let src = "function(head, req) { start({headers: {'X-Total': String(head.total_rows)}}); send('<ul>'); var row; while ((row = getRow())) { send('<li>' + row.key + '</li>'); } return '</ul>'; }";
        e.load_render("l", Render::List, src, "{}").unwrap();
        let out = Rc::new(RefCell::new(Vec::new()));
        let io = Box::new(Rows {
            rows: vec![r#"{"key":"a"}"#.into(), r#"{"key":"b"}"#.into()],
            out: out.clone(),
        });
        let (tail, _) = e.list(
            "l",
            r#"{"total_rows":2,"offset":0}"#.into(),
            r#"{"query":{},"headers":{}}"#.into(),
            io,
        );
        assert_eq!(tail.unwrap(), "</ul>");
        assert_eq!(
            *out.borrow(),
            vec![
                r#"start {"headers":{"X-Total":"2"}} <ul>"#.to_string(),
                "<li>a</li>".into(),
                "<li>b</li>".into(),
            ]
        );
        // A list that never reads its rows still starts its response.
        e.load_render(
            "t",
            Render::List,
            "function() { send('x'); return 'y'; }",
            "{}",
        )
        .unwrap();
        let out = Rc::new(RefCell::new(Vec::new()));
        let io = Box::new(Rows {
            rows: vec![],
            out: out.clone(),
        });
        let (tail, _) = e.list("t", "{}".into(), r#"{"query":{},"headers":{}}"#.into(), io);
        assert_eq!(tail.unwrap(), "y");
        assert_eq!(*out.borrow(), vec![r#"start {"headers":{}} x"#.to_string()]);
    }

    #[test]
    fn rewrite_functions_give_paths_or_responses() {
        let mut e = engine();
        let src = "function(req) { if (req.path[4] === 'none') return false; if (req.path[4] === 'teapot') return {code: 418, body: 'tea'}; return 'docs/' + req.path[4]; }";
        e.load_render("r", Render::Rewrite, src, "{}").unwrap();
        let run = |e: &mut Engine, last: &str| {
            e.render("r", vec![serde_json::json!({"method": "GET", "path": ["db", "_design", "d", "_rewrite", last]}).to_string()]).unwrap()
        };
        assert_eq!(run(&mut e, "x"), r#"{"path":"docs/x","method":"GET"}"#);
        assert_eq!(run(&mut e, "none"), "null");
        assert_eq!(run(&mut e, "teapot"), r#"{"code":418,"body":"tea"}"#);
    }
}
