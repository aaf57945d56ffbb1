"""A training script written as torchvision's classification reference is
(references/classification/train.py, presets.py, transforms.py of 0.14):
preset objects, RandomSampler/SequentialSampler, default_collate, the
MixUp/CutMix collate_fn lambda, --auto-augment, --random-erase,
--interpolation. The model is tiny; the data an ImageFolder. It writes, per
epoch, the hard targets of each batch as the loader gave them, the sample
indices its samplers drew, its loss and its validation accuracy, as JSON:
test_reference_recipe.py runs it as written, with its DataLoader( lines
switched to gpufeed's, and under `python -m gpufeed run`."""
import argparse
import json
import math
import random
import sys

import torch
import torch.utils.data
import torchvision
from torch.utils.data.dataloader import default_collate
from torchvision.transforms import autoaugment, transforms
from torchvision.transforms.functional import InterpolationMode


class ClassificationPresetTrain:
    def __init__(self, *, crop_size, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
                 interpolation=InterpolationMode.BILINEAR, hflip_prob=0.5,
                 auto_augment_policy=None, ra_magnitude=9, random_erase_prob=0.0):
        trans = [transforms.RandomResizedCrop(crop_size, interpolation=interpolation)]
        if hflip_prob > 0:
            trans.append(transforms.RandomHorizontalFlip(hflip_prob))
        if auto_augment_policy is not None:
            if auto_augment_policy == "ra":
                trans.append(autoaugment.RandAugment(interpolation=interpolation,
                                                     magnitude=ra_magnitude))
            elif auto_augment_policy == "ta_wide":
                trans.append(autoaugment.TrivialAugmentWide(interpolation=interpolation))
            else:
                aa_policy = autoaugment.AutoAugmentPolicy(auto_augment_policy)
                trans.append(autoaugment.AutoAugment(policy=aa_policy, interpolation=interpolation))
        trans.extend([transforms.PILToTensor(), transforms.ConvertImageDtype(torch.float),
                      transforms.Normalize(mean=mean, std=std)])
        if random_erase_prob > 0:
            trans.append(transforms.RandomErasing(p=random_erase_prob))
        self.transforms = transforms.Compose(trans)

    def __call__(self, img):
        return self.transforms(img)


class ClassificationPresetEval:
    def __init__(self, *, crop_size, resize_size=256, mean=(0.485, 0.456, 0.406),
                 std=(0.229, 0.224, 0.225), interpolation=InterpolationMode.BILINEAR):
        self.transforms = transforms.Compose([
            transforms.Resize(resize_size, interpolation=interpolation),
            transforms.CenterCrop(crop_size),
            transforms.PILToTensor(),
            transforms.ConvertImageDtype(torch.float),
            transforms.Normalize(mean=mean, std=std),
        ])

    def __call__(self, img):
        return self.transforms(img)


class RandomMixup(torch.nn.Module):
    """The reference's transforms.RandomMixup: the batch rolled by one, mixed."""

    def __init__(self, num_classes, p=0.5, alpha=1.0):
        super().__init__()
        self.num_classes, self.p, self.alpha = num_classes, p, alpha

    def forward(self, batch, target):
        if target.ndim == 1:
            target = torch.nn.functional.one_hot(target, num_classes=self.num_classes).to(
                dtype=batch.dtype)
        batch, target = batch.clone(), target.clone()
        if torch.rand(1).item() >= self.p:
            return batch, target
        batch_rolled, target_rolled = batch.roll(1, 0), target.roll(1, 0)
        lambda_param = float(torch._sample_dirichlet(torch.tensor([self.alpha, self.alpha]))[0])
        batch_rolled.mul_(1.0 - lambda_param)
        batch.mul_(lambda_param).add_(batch_rolled)
        target_rolled.mul_(1.0 - lambda_param)
        target.mul_(lambda_param).add_(target_rolled)
        return batch, target


class RandomCutmix(torch.nn.Module):
    """The reference's transforms.RandomCutmix: a box of the rolled batch."""

    def __init__(self, num_classes, p=0.5, alpha=1.0):
        super().__init__()
        self.num_classes, self.p, self.alpha = num_classes, p, alpha

    def forward(self, batch, target):
        if target.ndim == 1:
            target = torch.nn.functional.one_hot(target, num_classes=self.num_classes).to(
                dtype=batch.dtype)
        batch, target = batch.clone(), target.clone()
        if torch.rand(1).item() >= self.p:
            return batch, target
        batch_rolled, target_rolled = batch.roll(1, 0), target.roll(1, 0)
        lambda_param = float(torch._sample_dirichlet(torch.tensor([self.alpha, self.alpha]))[0])
        H, W = batch.shape[-2:]
        r_x = torch.randint(W, (1,))
        r_y = torch.randint(H, (1,))
        r = 0.5 * math.sqrt(1.0 - lambda_param)
        r_w_half, r_h_half = int(r * W), int(r * H)
        x1 = int(torch.clamp(r_x - r_w_half, min=0))
        y1 = int(torch.clamp(r_y - r_h_half, min=0))
        x2 = int(torch.clamp(r_x + r_w_half, max=W))
        y2 = int(torch.clamp(r_y + r_h_half, max=H))
        batch[:, :, y1:y2, x1:x2] = batch_rolled[:, :, y1:y2, x1:x2]
        lambda_param = float(1.0 - (x2 - x1) * (y2 - y1) / (W * H))
        target_rolled.mul_(1.0 - lambda_param)
        target.mul_(lambda_param).add_(target_rolled)
        return batch, target


class Recorded(torch.utils.data.RandomSampler):
    """RandomSampler, remembering what it drew (a sampler of the script's own)."""

    def __iter__(self):
        drawn = list(super().__iter__())
        self.drawn = drawn
        return iter(drawn)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-path", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("-b", "--batch-size", type=int, default=8)
    p.add_argument("-j", "--workers", type=int, default=0)
    p.add_argument("--auto-augment", default=None)
    p.add_argument("--random-erase", type=float, default=0.0)
    p.add_argument("--mixup-alpha", type=float, default=0.0)
    p.add_argument("--cutmix-alpha", type=float, default=0.0)
    p.add_argument("--interpolation", default="bilinear")
    p.add_argument("--crop-size", type=int, default=32)
    p.add_argument("--val-resize-size", type=int, default=36)
    args = p.parse_args()
    torch.manual_seed(0)
    random.seed(0)  # RandomChoice draws from Python's; the reference leaves it unseeded

    interpolation = InterpolationMode(args.interpolation)
    dataset = torchvision.datasets.ImageFolder(
        args.data_path + "/train",
        ClassificationPresetTrain(crop_size=args.crop_size, interpolation=interpolation,
                                  auto_augment_policy=args.auto_augment,
                                  random_erase_prob=args.random_erase))
    dataset_test = torchvision.datasets.ImageFolder(
        args.data_path + "/val",
        ClassificationPresetEval(crop_size=args.crop_size, resize_size=args.val_resize_size,
                                 interpolation=interpolation))
    train_sampler = Recorded(dataset)
    test_sampler = torch.utils.data.SequentialSampler(dataset_test)
    num_classes = len(dataset.classes)

    hard = []  # the targets each batch came with, before mixing
    mixup_transforms = []
    if args.mixup_alpha > 0.0:
        mixup_transforms.append(RandomMixup(num_classes, p=1.0, alpha=args.mixup_alpha))
    if args.cutmix_alpha > 0.0:
        mixup_transforms.append(RandomCutmix(num_classes, p=1.0, alpha=args.cutmix_alpha))
    if mixup_transforms:
        mixupcutmix = torchvision.transforms.RandomChoice(mixup_transforms)

        def collate_fn(batch):
            images, targets = default_collate(batch)
            hard.append(targets.tolist())
            return mixupcutmix(images, targets)
    else:
        collate_fn = default_collate

    data_loader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch_size, sampler=train_sampler, num_workers=args.workers,
        pin_memory=True, collate_fn=collate_fn)
    data_loader_test = torch.utils.data.DataLoader(
        dataset_test, batch_size=args.batch_size, sampler=test_sampler,
        num_workers=args.workers, pin_memory=True)

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(8, num_classes))
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    report = {"loader": type(data_loader).__module__, "epochs": []}
    for epoch in range(args.epochs):
        model.train()
        hard.clear()
        seen, losses, soft = [], [], []
        for image, target in data_loader:
            assert image.shape[1:] == (3, args.crop_size, args.crop_size), image.shape
            output = model(image)
            loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if target.ndim == 2:
                assert torch.allclose(target.sum(1), torch.ones(len(target)), atol=1e-5)
                soft.append(len(target))
            else:
                seen.append(target.tolist())
        model.eval()
        correct = total = 0
        val_targets = []
        with torch.inference_mode():
            for image, target in data_loader_test:
                correct += (model(image).argmax(1) == target).sum().item()
                total += len(target)
                val_targets += target.tolist()
        drawn = train_sampler.drawn
        targets = hard if mixup_transforms else seen
        report["epochs"].append({
            "order": drawn, "targets": [t for b in targets for t in b],
            "want": [dataset.targets[i] for i in drawn], "soft_batches": len(soft),
            "loss": sum(losses) / len(losses), "val_targets": val_targets,
            "val_total": total, "val_acc": correct / total})
        print(f"epoch {epoch}: train loss {report['epochs'][-1]['loss']:.3f}, "
              f"val acc {correct / total:.3f}", flush=True)
    with open(args.out, "w") as f:
        json.dump(report, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
