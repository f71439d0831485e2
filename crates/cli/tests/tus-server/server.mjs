// A real tus 1.0 server for oomguard's interop test: @tus/server with @tus/file-store.
// Usage: node server.mjs PORT DIR   (listens on 127.0.0.1 only; prints "listening PORT")
import http from 'node:http';
import { Server } from '@tus/server';
import { FileStore } from '@tus/file-store';

const port = Number(process.argv[2] || 0);
const directory = process.argv[3] || './uploads';
const tus = new Server({ path: '/files', datastore: new FileStore({ directory }) });
const server = http.createServer((req, res) => tus.handle(req, res));
server.listen(port, '127.0.0.1', () => {
  console.log(`listening ${server.address().port}`);
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => server.close(() => process.exit(0)));
