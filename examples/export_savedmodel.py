"""Export a saved bertlayers model for TF Serving: NAME (token ids in) and NAME_text (strings in).

    python examples/export_savedmodel.py --model runs/sentiment/model.keras --name sentiment
    python examples/export_savedmodel.py --model runs/pretrain --name tiny_bert     # an encoder
    tensorflow_model_server --rest_api_port=8501 --model_config_file=$PWD/savedmodels/models.config

--model takes a .keras file (an encoder or task model of the library), a pretrain.py output
folder, or a Hugging Face BERT folder. Versions are integers, the next free one by default.
"""

import argparse
import os

from bertlayers.data.assets import bert_uncased_vocabulary
from bertlayers.export import export_for_serving
from bertlayers.convert import load_encoder, load_model_file
from bertlayers.utils.cli import run_script
from bertlayers.utils.validation import POSITIVE_INT, Range, flag


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--name", required=True, help="the model's name in TF Serving")
    parser.add_argument("--base_dir", default="savedmodels")
    parser.add_argument("--vocabulary", default=None, help="vocab.txt (default: beside the model, else bert-base-uncased)")
    parser.add_argument("--no_text", action="store_true", help="export the token-ids model only")
    parser.add_argument("--uncased", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--sequence_length", type=flag(Range(int, 2)), default=128)
    parser.add_argument("--truncate", action="store_true", help="cut over-long requests instead of rejecting them")
    parser.add_argument("--version", type=flag(POSITIVE_INT), default=None)
    parser.add_argument("--precision", default="float32", choices=["float32", "bfloat16"],
                        help="bfloat16: half-size weights, faster only on CPUs/GPUs with fast bfloat16 products")
    args = parser.parse_args()

    if args.model.endswith(".keras"):
        model = load_model_file(args.model)
    else:
        model = load_encoder(args.model)
    folder = args.model if os.path.isdir(args.model) else os.path.dirname(args.model)
    vocabulary = args.vocabulary or (
        os.path.join(folder, "vocab.txt") if os.path.isfile(os.path.join(folder, "vocab.txt")) else bert_uncased_vocabulary()
    )
    written = export_for_serving(
        model, args.name, base_dir=args.base_dir, vocabulary=None if args.no_text else vocabulary,
        lowercase=args.uncased, sequence_length=args.sequence_length, truncate=args.truncate, version=args.version,
        precision=args.precision, verbose=True,
    )
    for name, path in written.items():
        print(f"{name}: {path}")
    print(f"TF Serving config: {os.path.join(args.base_dir, 'models.config')}")


if __name__ == "__main__":
    run_script(main)
