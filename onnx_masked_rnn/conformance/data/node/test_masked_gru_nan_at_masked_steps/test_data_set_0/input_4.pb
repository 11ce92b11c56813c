B	initial_hJ0щ1>«JZ?Iн•>БgЖЅ§OЃ?ЧќТѕgLїАDЎѕld?zЗї
Oд>цеф=