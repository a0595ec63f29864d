"""Ask a running TF Serving for predictions, over gRPC (port 8500) or REST (port 8501).

The models are the ones `examples/export_savedmodel.py` writes and `savedmodels/models.config`
names (`cd savedmodels && docker compose up` starts TF Serving on them: docs/serving.md). Text
models take strings; an ids model takes `--input token_ids=101,2307,102` (and the other ids
inputs its signature names).

    python examples/serving_client.py --grpc localhost:8500 --name sentiment_text --text "Loved it." --text "Dull."
    python examples/serving_client.py --rest http://localhost:8501 --name sentiment_text --text "Loved it."
    python examples/serving_client.py --grpc localhost:8500 --name sentiment_text --signature text_pair \\
        --input text_a="A gorgeous movie." --input text_b="I loved it."

Prints one JSON object a row ({"predictions": [...]}, as TF Serving's REST API answers). A request
the server refuses (a malformed input, an unknown model) ends with one line naming its answer.
Needs neither Keras nor bertlayers: grpcio and tensorflow-serving-api for gRPC (TensorFlow for its
tensor protos), the standard library for REST.
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.request

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # for gRPC's tensor protos, TensorFlow loads quietly


class Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The docstring as written and every default shown, as bertlayers.utils.cli's (this script
    does not import bertlayers)."""


def fail(message, status=2):
    """One line on stderr: status 2 for a refused request or a user's mistake, 1 where no server answers."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(status)


NO_SERVER = "is TF Serving running there? (`docker compose up` in the export's base folder)"


def parse_inputs(args):
    """{input name: [one value a row]} from --text and --input NAME=VALUE (ids as comma lists)."""
    columns = {}
    for text in args.text or []:
        columns.setdefault("text", []).append(text)
    for item in args.input or []:
        name, separator, value = item.partition("=")
        if not separator or not name:
            fail(f"--input takes NAME=VALUE, got {item!r}")
        if name.endswith("_ids") or name == "padding_mask":
            try:
                value = [int(v) for v in value.split(",")]
            except ValueError:
                fail(f"--input {name} takes comma-separated integers, got {value!r}")
        columns.setdefault(name, []).append(value)
    if not columns:
        fail("give --text or --input")
    for name, values in columns.items():
        if not isinstance(values[0], str) and len({len(v) for v in values}) > 1:
            fail(f"the rows of --input {name} have different lengths {[len(v) for v in values]}: pad them to one")
    rows = {len(values) for values in columns.values()}
    if len(rows) != 1:
        fail(f"every input needs as many values, got { ({k: len(v) for k, v in columns.items()}) }")
    return columns


def predict_rest(url, name, signature, columns):
    """TF Serving's REST predict API, row format."""
    rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
    body = json.dumps({"signature_name": signature, "instances": rows}).encode("utf-8")
    request = urllib.request.Request(
        f"{url.rstrip('/')}/v1/models/{name}:predict", body, {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        answer = error.read().decode("utf-8", "replace")
        try:
            answer = json.loads(answer).get("error", answer)
        except ValueError:
            pass
        fail(f"the server refused the request ({error.code}): {answer}")
    except (urllib.error.URLError, OSError) as error:  # no server: refused, unreachable, timed out
        fail(f"no answer from {url}: {getattr(error, 'reason', error)}; {NO_SERVER}", 1)


def predict_grpc(address, name, signature, columns):
    """TF Serving's gRPC PredictionService.Predict; the answer in REST's row format."""
    import grpc
    import numpy as np
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    for key, values in columns.items():
        # The exported signatures take int32 ids (numpy's default int64 would be refused).
        array = np.asarray(values, dtype=np.int32 if not isinstance(values[0], str) else object)
        request.inputs[key].CopyFrom(tf.make_tensor_proto(array))
    with grpc.insecure_channel(address) as channel:
        try:
            response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=60)
        except grpc.RpcError as error:
            if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                fail(f"no answer from {address} ({error.code().name}); {NO_SERVER}", 1)
            fail(f"the server refused the request ({error.code().name}): {error.details()}")
    outputs = {key: tf.make_ndarray(proto) for key, proto in response.outputs.items()}
    count = len(next(iter(outputs.values())))
    return {"predictions": [{key: _plain(value[i]) for key, value in sorted(outputs.items())} for i in range(count)]}


def _plain(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if hasattr(value, "tolist"):
        value = value.tolist()
        if isinstance(value, list) and value and isinstance(value[0], bytes):
            return [v.decode("utf-8") for v in value]
        return value.decode("utf-8") if isinstance(value, bytes) else value
    return value


def main():
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=Help,
        allow_abbrev=False,
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--grpc", metavar="HOST:PORT", help="TF Serving's gRPC address, e.g. localhost:8500")
    where.add_argument("--rest", metavar="URL", help="TF Serving's REST address, e.g. http://localhost:8501")
    parser.add_argument("--name", required=True, help="the model's name in models.config")
    parser.add_argument("--signature", default="serving_default", help="the signature to call")
    parser.add_argument(
        "--text", action="append", help="a text for the `text` input (repeatable: one row each; none: use --input)"
    )
    parser.add_argument(
        "--input", action="append", help="NAME=VALUE for any input (repeatable: one row each; none: use --text)"
    )
    args = parser.parse_args()
    columns = parse_inputs(args)
    if args.grpc:
        answer = predict_grpc(args.grpc, args.name, args.signature, columns)
    else:
        answer = predict_rest(args.rest, args.name, args.signature, columns)
    json.dump(answer, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
