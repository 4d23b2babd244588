"""The gRPC peers of tests/grpc.rs, on grpcio with raw-bytes methods (no
protobuf): `server MARKER_DIR` serves test.Echo on 127.0.0.1 and prints its
port; `client HOST:PORT` makes the calls through Pier and prints what each
returned as one JSON object."""

import json
import os
import sys
import threading
import time
from concurrent import futures

import grpc

NO_PROXY = [("grpc.enable_http_proxy", 0)]


def serve(marker_dir):
    def unary(request, context):
        return b"echo:" + request

    def stream(request, context):
        for i in range(int(request)):
            yield ("item%d" % i).encode()

    def total(requests, context):
        return str(sum(len(r) for r in requests)).encode()

    def chat(requests, context):
        for r in requests:
            yield b"re:" + r

    def fail(request, context):
        context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")

    def slow(request, context):
        # Waits for the call to end; one that ended without an answer was
        # cancelled (by the client's RST_STREAM, which Pier relays).
        ended = threading.Event()
        context.add_callback(ended.set)
        ended.wait(10)
        if not context.is_active():
            with open(os.path.join(marker_dir, request.decode()), "w") as f:
                f.write("cancelled")
        return b"late"

    handlers = grpc.method_handlers_generic_handler(
        "test.Echo",
        {
            "Unary": grpc.unary_unary_rpc_method_handler(unary),
            "Stream": grpc.unary_stream_rpc_method_handler(stream),
            "Fail": grpc.unary_unary_rpc_method_handler(fail),
            "Total": grpc.stream_unary_rpc_method_handler(total),
            "Chat": grpc.stream_stream_rpc_method_handler(chat),
            "Slow": grpc.unary_unary_rpc_method_handler(slow),
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=NO_PROXY)
    server.add_generic_rpc_handlers((handlers,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()


def call_code(fn):
    try:
        fn()
        return ["OK", ""]
    except grpc.RpcError as e:
        return [e.code().name, e.details() or ""]


def client(target):
    out = {}
    with grpc.insecure_channel(target, options=NO_PROXY) as ch:
        unary = ch.unary_unary("/test.Echo/Unary")
        out["unary"] = unary(b"hello", timeout=10).decode()
        stream = ch.unary_stream("/test.Echo/Stream")
        out["stream"] = [m.decode() for m in stream(b"3", timeout=10)]
        total = ch.stream_unary("/test.Echo/Total")
        out["total"] = total(iter([b"x" * 40000] * 20), timeout=10).decode()
        chat = ch.stream_stream("/test.Echo/Chat")
        out["chat"] = [m.decode() for m in chat(iter([b"a", b"b", b"c"]), timeout=10)]
        out["fail"] = call_code(lambda: ch.unary_unary("/test.Echo/Fail")(b"", timeout=10))
        slow = ch.unary_unary("/test.Echo/Slow")
        started = time.monotonic()
        out["deadline"] = call_code(lambda: slow(b"deadline", timeout=0.5))
        out["deadline_s"] = time.monotonic() - started
        call = slow.future(b"cancel", timeout=10)
        time.sleep(0.5)
        call.cancel()
        out["cancel"] = call.cancelled()
        # The channel still works after all that.
        out["after"] = unary(b"again", timeout=10).decode()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(sys.argv[2])
    else:
        client(sys.argv[2])
