"""The closest thing to TF Serving this machine runs: its gRPC PredictionService.Predict and its
REST predict API (row format), answering from the SavedModels of a base folder with TensorFlow
and tensorflow-text's kernels, as the model server does. No `tensorflow_model_server` binary
installs from the package registries; the clients under test (examples/serving_client.py) speak
to these exactly as to the real server: the same protos, URL and JSON."""

import contextlib
import json
import os
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from bertlayers.export.serving_latency import load_text_ops


class Models:
    """The newest version of each model folder under `base`, loaded on first use."""

    def __init__(self, base):
        self.base, self.loaded = base, {}
        load_text_ops()

    def signature(self, name, signature_name):
        folder = os.path.join(self.base, name)
        if not os.path.isdir(folder):
            raise LookupError(f"Servable not found for request: Latest({name})")
        if name not in self.loaded:
            version = max(int(n) for n in os.listdir(folder) if n.isdigit())
            self.loaded[name] = tf.saved_model.load(os.path.join(folder, str(version)))
        signatures = self.loaded[name].signatures
        if signature_name not in signatures:
            raise LookupError(f'Serving signature key "{signature_name}" not found.')
        return signatures[signature_name]

    def predict(self, name, signature_name, inputs):
        """{output: numpy array} of the signature called on {input: numpy array}."""
        function = self.signature(name, signature_name or "serving_default")
        spec = function.structured_input_signature[1]
        unknown = sorted(set(inputs) - set(spec))
        if unknown:
            raise ValueError(f"input tensor alias not found in signature: {', '.join(unknown)}")
        missing = sorted(set(spec) - set(inputs))
        if missing:
            raise ValueError(f"input size does not match signature: missing {', '.join(missing)}")
        fed = {key: tf.constant(value, dtype=spec[key].dtype) for key, value in inputs.items()}
        return {key: value.numpy() for key, value in function(**fed).items()}


class _Service(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, models):
        self.models = models

    def Predict(self, request, context):  # noqa: N802 (the proto's name)
        inputs = {key: tf.make_ndarray(proto) for key, proto in request.inputs.items()}
        try:
            outputs = self.models.predict(request.model_spec.name, request.model_spec.signature_name, inputs)
        except LookupError as error:
            context.abort(grpc.StatusCode.NOT_FOUND, str(error))
        except (ValueError, tf.errors.InvalidArgumentError) as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, getattr(error, "message", str(error)))
        response = predict_pb2.PredictResponse()
        response.model_spec.CopyFrom(request.model_spec)
        for key, value in outputs.items():
            response.outputs[key].CopyFrom(tf.make_tensor_proto(value))
        return response


def _row_value(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    value = value.tolist() if isinstance(value, np.ndarray) or np.isscalar(value) else value
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _rest_handler(models):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _answer(self, status, body):
            data = json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):  # noqa: N802 (http.server's name)
            prefix, suffix = "/v1/models/", ":predict"
            if not (self.path.startswith(prefix) and self.path.endswith(suffix)):
                return self._answer(404, {"error": f"Malformed request: POST {self.path}"})
            name = self.path[len(prefix) : -len(suffix)]
            try:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                rows = request["instances"]
                inputs = {
                    key: np.asarray([row[key] for row in rows], dtype=object if isinstance(rows[0][key], str) else None)
                    for key in rows[0]
                }
                outputs = models.predict(name, request.get("signature_name"), inputs)
            except LookupError as error:
                return self._answer(404, {"error": str(error)})
            except (ValueError, KeyError, TypeError, tf.errors.InvalidArgumentError) as error:
                return self._answer(400, {"error": getattr(error, "message", str(error))})
            count = len(next(iter(outputs.values())))
            rows = [{key: _row_value(value[i]) for key, value in outputs.items()} for i in range(count)]
            return self._answer(200, {"predictions": rows})

    return Handler


@contextlib.contextmanager
def serving(base):
    """A gRPC and a REST server on free local ports for the models under `base`: yields
    (grpc address, REST URL)."""
    models = Models(str(base))
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(_Service(models), grpc_server)
    port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    rest_server = ThreadingHTTPServer(("127.0.0.1", 0), _rest_handler(models))
    thread = threading.Thread(target=rest_server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{port}", f"http://127.0.0.1:{rest_server.server_address[1]}"
    finally:
        rest_server.shutdown()
        grpc_server.stop(None)
