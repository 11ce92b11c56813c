B	initial_cJK
)>>™O¿89t>•Žr>·g>­Ó?