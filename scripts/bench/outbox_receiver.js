// The app's backend for scripts/bench-outbox: answers every webhook 204 at once (keep-alive)
// and remembers `<webhook-id> <arrival Unix ms>` of each; writes them to OUT on SIGTERM.
// SIGUSR1 makes it answer 410 Gone (remembering nothing), as an app that removed its endpoint;
// SIGUSR2 makes it answer 204 again.
//
//   node outbox_receiver.js PORT OUT
const http = require("http");
const fs = require("fs");
const [port, out] = process.argv.slice(2);
const lines = [];
let gone = false;
const server = http.createServer({ keepAliveTimeout: 120000 }, (request, response) => {
    request.on("data", () => {});
    request.on("end", () => {
        if (gone) {
            response.writeHead(410);
            response.end();
            return;
        }
        lines.push(`${request.headers["webhook-id"]} ${Date.now()}`);
        response.writeHead(204);
        response.end();
    });
});
server.listen(Number(port), "127.0.0.1", () => console.error(`receiver on ${port}`));
process.on("SIGUSR1", () => { gone = true; });
process.on("SIGUSR2", () => { gone = false; });
process.on("SIGTERM", () => {
    fs.writeFileSync(out, lines.join("\n") + "\n");
    process.exit(0);
});
