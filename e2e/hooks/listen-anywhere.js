// listen-anywhere.js is preloaded (node -r) into a hook server written to
// listen on a fixed port, as Metacontroller's examples/nodejs/server.js
// listens on 80 inside its Pod. It makes the server listen on a free
// loopback port instead and print "listening on PORT", so the end-to-end
// tests run Metacontroller's own server and hooks, unchanged, as local
// processes.
const http = require('http');

const listen = http.Server.prototype.listen;
http.Server.prototype.listen = function () {
  this.once('listening', () => console.log(`listening on ${this.address().port}`));
  return listen.call(this, 0, '127.0.0.1');
};
