"""A PyTorch training script written the way torchvision's ImageNet example is:
ImageFolder, the standard transforms, DataLoader, one `for` per epoch,
DistributedSampler under torch.multiprocessing.spawn. It uses torch's
DataLoader; gpufeed's tests run it as written and with the one line
`torch.utils.data.DataLoader(` -> `gpufeed.DataLoader(` changed
(python/tests/test_dataloader_switch.py).

    python3 train_imagefolder.py DATA [--epochs 3] [-b 16] [-j 2] [--world-size 2]

DATA holds train/ and val/ ImageFolder trees. Prints a JSON line per epoch
and rank: the targets in the order trained, the loss and the accuracy.
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.utils.data
import torch.utils.data.distributed
import torchvision.datasets as datasets
import torchvision.transforms as transforms


def parse(argv):
    p = argparse.ArgumentParser(description="ImageFolder training, the torchvision way")
    p.add_argument("data")
    p.add_argument("--epochs", default=3, type=int)
    p.add_argument("-b", "--batch-size", default=16, type=int)
    p.add_argument("-j", "--workers", default=2, type=int)
    p.add_argument("--lr", default=0.05, type=float)
    p.add_argument("--image-size", default=32, type=int)
    p.add_argument("--seed", default=1, type=int)
    p.add_argument("--world-size", default=1, type=int)
    p.add_argument("--port", default=29517, type=int)
    return p.parse_args(argv)


def model_for(classes):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes))


def main_worker(rank, args):
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    distributed = args.world_size > 1
    if distributed:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}",
                                world_size=args.world_size, rank=rank)

    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    size = args.image_size
    train_dataset = datasets.ImageFolder(
        os.path.join(args.data, "train"),
        transforms.Compose([
            transforms.RandomResizedCrop(size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            normalize,
        ]))
    val_dataset = datasets.ImageFolder(
        os.path.join(args.data, "val"),
        transforms.Compose([
            transforms.Resize(size * 8 // 7),
            transforms.CenterCrop(size),
            transforms.ToTensor(),
            normalize,
        ]))
    if distributed:
        train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset)
        val_sampler = torch.utils.data.distributed.DistributedSampler(val_dataset, shuffle=False,
                                                                      drop_last=True)
    else:
        train_sampler = None
        val_sampler = None

    train_loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, shuffle=(train_sampler is None),
        num_workers=args.workers, pin_memory=True, sampler=train_sampler)
    val_loader = torch.utils.data.DataLoader(
        val_dataset, batch_size=args.batch_size, shuffle=False,
        num_workers=args.workers, pin_memory=True, sampler=val_sampler)

    model = model_for(len(train_dataset.classes))
    if distributed:
        model = nn.parallel.DistributedDataParallel(model)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9)

    for epoch in range(args.epochs):
        if distributed:
            train_sampler.set_epoch(epoch)
        loss, targets = train(train_loader, model, criterion, optimizer)
        acc1, val_targets = validate(val_loader, model)
        line = json.dumps({"epoch": epoch, "rank": rank, "batches": len(train_loader),
                           "targets": targets, "loss": loss, "acc1": acc1,
                           "val_targets": val_targets})
        sys.stdout.write(line + "\n")  # one write: the ranks share the pipe
        sys.stdout.flush()
    if distributed:
        dist.destroy_process_group()


def train(train_loader, model, criterion, optimizer):
    model.train()
    seen, total = [], 0.0
    for i, (images, target) in enumerate(train_loader):
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * images.size(0)
        seen += target.tolist()
    return total / max(1, len(seen)), seen


def validate(val_loader, model):
    model.eval()
    correct, seen = 0, []
    with torch.no_grad():
        for i, (images, target) in enumerate(val_loader):
            output = model(images)
            correct += (output.argmax(1) == target).sum().item()
            seen += target.tolist()
    return correct / max(1, len(seen)), seen


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.world_size > 1:
        mp.spawn(main_worker, nprocs=args.world_size, args=(args,))
    else:
        main_worker(0, args)


if __name__ == "__main__":
    main()
