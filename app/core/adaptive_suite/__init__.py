"""The adaptive suite: topics grown from what fooled the target, their generated variants, vetted by people."""
