// Preloaded into Node servers that listen on every interface (server-everything does): binds
// their listening sockets to 127.0.0.1 only, so tests never expose a port beyond loopback.
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (port, ...rest) {
  if (typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port))) {
    const callback = rest.find((a) => typeof a === "function");
    return callback
      ? listen.call(this, { port: Number(port), host: "127.0.0.1" }, callback)
      : listen.call(this, { port: Number(port), host: "127.0.0.1" });
  }
  return listen.call(this, port, ...rest);
};
