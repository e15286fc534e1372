// The script's API, built over the host's natives. The natives stay in this closure: the
// script sees only `tools` and `console` (and `input`, set for each run).
(function (native) {
  "use strict";
  const unwrap = (tool, reply) => {
    const r = JSON.parse(reply);
    if (r.ok) return r.value;
    const error = new Error(r.error);
    error.tool = tool;
    throw error;
  };
  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  globalThis.tools = Object.freeze({
    async call(name, args) {
      if (typeof name !== "string") {
        throw new TypeError('tools.call(name, args): name must be a qualified tool name such as "time__get_current_time"');
      }
      if (args !== undefined && !isObject(args)) {
        throw new TypeError(`tools.call("${name}", args): args must be an object of the tool's arguments`);
      }
      return unwrap(name, await native.call(name, JSON.stringify(args ?? {})));
    },
    async search(query, limit) {
      return unwrap("search_tools", await native.search(String(query), limit === undefined ? -1 : Number(limit)));
    },
    async describe(name) {
      return unwrap("get_tool_details", await native.describe(String(name)));
    },
  });
  const show = (v) => {
    if (typeof v === "string") return v;
    if (v instanceof Error) return v.stack ? `${v}\n${v.stack}` : String(v);
    try {
      return JSON.stringify(v) ?? String(v);
    } catch {
      return String(v);
    }
  };
  const line = (level) => (...args) => native.log(level, args.map(show).join(" "));
  globalThis.console = Object.freeze({
    log: line("log"),
    info: line("info"),
    debug: line("debug"),
    warn: line("warn"),
    error: line("error"),
  });
})
