// The app's backend for scripts/bench-outbox: answers every webhook 204 at once (keep-alive)
// and remembers `<webhook-id> <arrival Unix ms>`; writes them to OUT on SIGTERM.
//
//   node outbox_receiver.js PORT OUT
const http = require("http");
const fs = require("fs");
const [port, out] = process.argv.slice(2);
const lines = [];
const server = http.createServer({ keepAliveTimeout: 120000 }, (request, response) => {
    request.on("data", () => {});
    request.on("end", () => {
        lines.push(`${request.headers["webhook-id"]} ${Date.now()}`);
        response.writeHead(204);
        response.end();
    });
});
server.listen(Number(port), "127.0.0.1", () => console.error(`receiver on ${port}`));
process.on("SIGTERM", () => {
    fs.writeFileSync(out, lines.join("\n") + "\n");
    process.exit(0);
});
