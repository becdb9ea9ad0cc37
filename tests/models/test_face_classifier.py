"""The faces' target classifier: the residual net, its augmentation, early stopping on accuracy,
and the channels-last layout (same function as the default layout)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from models.classifier_training import (
    AUGMENT_SHIFT,
    ClassifierSettings,
    StopOn,
    _improves,
    augment_images,
)
from models.factory import model_family
from models.resnet_classifier import ResNetClassifier
from models.training import channels_last_model, image_layout
from models.vae import ConditionalConvVAE


def test_resnet_is_resnet10_sized_and_gives_logits():
    model = ResNetClassifier(channels=3, num_classes=20).eval()
    n_params = sum(p.numel() for p in model.parameters())
    assert 1.1e6 < n_params < 1.3e6
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d) and m.kernel_size == (3, 3)]
    assert len(convs) == 9  # stem + 4 blocks x 2: ten weighted layers with the dense head
    assert model(torch.rand(2, 3, 64, 64)).shape == (2, 20)
    assert ResNetClassifier(channels=1, num_classes=3).eval()(torch.rand(1, 1, 8, 8)).shape == (
        1,
        3,
    )


def _naive_augment(x, flip, dy, dx, s):
    """One image at a time: flip, reflect-pad by s, crop at (dy, dx)."""
    out = []
    for i in range(len(x)):
        img = x[i].flip(2) if flip[i] else x[i]
        pad = nn.functional.pad(img[None], (s, s, s, s), mode="reflect")[0]
        out.append(pad[:, dy[i] : dy[i] + x.shape[2], dx[i] : dx[i] + x.shape[3]])
    return torch.stack(out) if out else x.clone()


@pytest.mark.parametrize("batch", [0, 1, 5])
def test_augmentation_equals_a_per_image_loop(batch):
    x = torch.rand(batch, 3, 12, 10, generator=torch.Generator().manual_seed(1))
    got = augment_images(x, generator=torch.Generator().manual_seed(7))
    g = torch.Generator().manual_seed(7)  # the draws augment_images makes, in its order
    flip = torch.rand(batch, generator=g) < 0.5
    s = AUGMENT_SHIFT
    dy = torch.randint(0, 2 * s + 1, (batch,), generator=g)
    dx = torch.randint(0, 2 * s + 1, (batch,), generator=g)
    assert torch.equal(got, _naive_augment(x, flip, dy, dx, s))


def test_augmentation_changes_images_and_keeps_their_pixels_range():
    x = torch.rand(64, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    out = augment_images(x, generator=torch.Generator().manual_seed(0))
    changed = (out != x).flatten(1).any(1).float().mean()
    assert changed > 0.9 and out.min() >= x.min() and out.max() <= x.max()


def test_early_stopping_on_accuracy_ignores_cross_entropy_but_breaks_ties_with_it():
    best = (1.0, 0.30)  # (cross-entropy, accuracy)
    assert _improves(StopOn.ACCURACY, (2.0, 0.31), best)  # higher accuracy, worse CE
    assert not _improves(StopOn.ACCURACY, (0.5, 0.29), best)  # better CE, lower accuracy
    assert _improves(StopOn.ACCURACY, (0.9, 0.30), best)
    assert not _improves(StopOn.LOSS, (2.0, 0.31), best)
    assert _improves(StopOn.LOSS, (0.5, 0.29), best)


def test_classifier_settings_refuse_bad_values():
    with pytest.raises(ValueError, match="label_smoothing"):
        ClassifierSettings(epochs=1, patience=1, label_smoothing=1.0)
    with pytest.raises(ValueError, match="'sometimes'"):
        ClassifierSettings(epochs=1, patience=1, stop_on="sometimes")


def test_image_family_builds_the_named_classifier_and_refuses_unknown_ones():
    family = model_family((3, 64, 64), 20)
    assert isinstance(family.classifier("resnet"), ResNetClassifier)
    with pytest.raises(ValueError, match="small-cnn, resnet, resnet-half"):
        family.classifier("vgg16")
    with pytest.raises(ValueError, match="for images"):
        model_family((100, 6), 4).classifier("resnet")


def test_channels_last_gives_the_same_vae_and_classifier_outputs():
    torch.manual_seed(0)
    vae = ConditionalConvVAE(channels=3, height=32, width=32, num_classes=4, latent_dim=8).eval()
    clf = ResNetClassifier(channels=3, num_classes=4).eval()
    x, y, z = torch.rand(6, 3, 32, 32), torch.arange(6) % 4, torch.randn(6, 8)
    with torch.no_grad():
        before = vae.decode(z, y), vae.encode(x, y)[0], clf(x)
        state = {k: v.clone() for k, v in vae.state_dict().items()}
        channels_last_model(vae), channels_last_model(clf)
        after = vae.decode(z, y), vae.encode(image_layout(x), y)[0], clf(image_layout(x))
    assert vae.decoder[1].weight.is_contiguous(memory_format=torch.channels_last)
    assert all(torch.equal(state[k], v) for k, v in vae.state_dict().items())
    for a, b in zip(before, after, strict=True):  # other kernels: float rounding only
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)
