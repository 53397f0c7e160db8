"""Run by tests/test_train.py under torchrun (2 CPU processes, gloo): train a tiny GPT with
DistributedDataParallel and save rank 0's final parameters to the path in argv[1]."""
import sys

import torch
import torch.distributed as dist

from tests.test_train import small_setup
from mathref.train import train


def main(out_path):
    dist.init_process_group("gloo")
    model, train_data, val_data, cfg = small_setup(dropout=0.0)
    history = train(model, train_data, val_data, cfg)
    if dist.get_rank() == 0:
        torch.save({"params": model.state_dict(), "loss": history["train_loss"]}, out_path)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
