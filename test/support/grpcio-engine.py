"""
A gRPC engine served by grpcio (grpc-core), as Python engines serve gRPC: started by tests on
127.0.0.1 with port 0, it prints "listening on PORT" and answers one unary method, Echo, with the
bytes it was sent (a generic handler, so no generated code is needed). The server keeps
grpc-core's default keepalive policy, the one a client's PINGs must respect. It ends when its
stdin closes.
"""
import sys
from concurrent import futures

import grpc

SERVICE = "dynamo.sidecar.testing.GrpcioEngine"


def echo(request, context):
    return request


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    # No serializers: the handler gets and returns the message bytes as they are on the wire.
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"Echo": grpc.unary_unary_rpc_method_handler(echo)})])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"listening on {port}", flush=True)
    sys.stdin.read()
    server.stop(0)


if __name__ == "__main__":
    main()
