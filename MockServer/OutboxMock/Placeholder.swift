// placeholder until the mock server lands
